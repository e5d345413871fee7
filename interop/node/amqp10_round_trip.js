'use strict';
// A send / browse / consume round trip with the amqp10 client (node-amqp10), which speaks
// AMQP 1.0 without SASL unless given credentials:
//   node amqp10_round_trip.js URL ADDRESS COUNT [--user NAME]
// With --user, the credentials go where amqp10 takes them, in the URL it connects to
// (amqp://NAME:PASSWORD@host:port, which makes it use SASL PLAIN); the password comes from
// INTEROP_PASSWORD and the URL is built here, so it is never on the command line.
// Sends COUNT messages (bodies "message-0" ...), each settled accepted, browses them (source
// distribution-mode copy; amqp10 settles what it receives), then consumes them. Prints
// {"sent", "browsed", "consumed"} as one JSON line; exits 1 on error or after 10 seconds.

const amqp = require('amqp10');
const { parseRoundTrip, report } = require('./round_trip');

const { url, address, count, bodies, user, password } = parseRoundTrip('amqp10_round_trip.js');

// Receive `count` messages on a new receiver, then detach it.
async function take(client, options) {
  const receiver = await client.createReceiver(address, options);
  const got = [];
  await new Promise((resolve, reject) => {
    receiver.on('message', (message) => {
      got.push(message.body);
      if (got.length === count) resolve();
    });
    receiver.on('errorReceived', reject);
  });
  await receiver.detach();
  return got;
}

async function main() {
  const client = new amqp.Client(amqp.Policy.merge({ reconnect: null }));
  // amqp10 rejects connect() with a bare AmqpDisconnectedError when the broker refuses it;
  // the reason (a SASL outcome, an unexpected protocol header) comes only as this event.
  client.on(amqp.Client.ErrorReceived, (error) => process.stderr.write(`errorReceived: ${error}\n`));
  const target = new URL(url);
  if (user !== undefined) {
    target.username = encodeURIComponent(user);
    target.password = encodeURIComponent(password);
  }
  await client.connect(target.toString());
  const sender = await client.createSender(address);
  const sent = [];
  for (const body of bodies) {
    await sender.send(body);  // resolves when the broker settles it accepted
    sent.push(body);
  }
  const browsed = await take(client, { attach: { source: { distributionMode: 'copy' } } });
  const consumed = await take(client, {});
  await client.disconnect();
  return { sent, browsed, consumed };
}

report(main);
