'use strict';
// A send / browse / consume round trip with rhea-promise, the promise API over rhea that
// Azure's SDKs use: node rhea_promise_round_trip.js URL ADDRESS COUNT [--user NAME]
// Sends COUNT messages (bodies "message-0" ...) with an awaitable sender (each settled
// accepted), browses them (source distribution-mode copy, accepting each as the default
// receiver does), then consumes them. Prints {"sent", "browsed", "consumed"} as one JSON
// line; exits 1 on error or when a step has not finished in 10 seconds. With --user, rhea's
// `username` and `password` connection options (SASL PLAIN; password from INTEROP_PASSWORD).

const { Connection, ReceiverEvents } = require('rhea-promise');
const { parseRoundTrip, report } = require('./round_trip');

const { url, address, count, bodies, user, password } = parseRoundTrip('rhea_promise_round_trip.js');

// Receive `count` messages on a new receiver, then close it.
async function take(connection, source) {
  const got = [];
  const receiver = await connection.createReceiver({ source, credit_window: count });
  await new Promise((resolve, reject) => {
    receiver.on(ReceiverEvents.message, (context) => {
      got.push(context.message.body);
      if (got.length === count) resolve();
    });
    receiver.on(ReceiverEvents.receiverError, (context) => reject(context.receiver.error));
  });
  await receiver.close();
  return got;
}

async function main() {
  const parsed = new URL(url);
  const options = { host: parsed.hostname, port: Number(parsed.port), transport: 'tcp',
                    reconnect: false };
  if (user !== undefined) Object.assign(options, { username: user, password });
  const connection = new Connection(options);
  await connection.open();
  const sender = await connection.createAwaitableSender({ target: { address } });
  const sent = [];
  for (const body of bodies) {
    await sender.send({ body });  // resolves when the broker settles it accepted
    sent.push(body);
  }
  await sender.close();
  const browsed = await take(connection, { address, distribution_mode: 'copy' });
  const consumed = await take(connection, { address });
  await connection.close();
  return { sent, browsed, consumed };
}

report(main);
