'use strict';
// rhea as an AMQP Management client, the way a Broker-J management client talks:
//   node management.js URL REQUESTS_JSON
// REQUESTS_JSON is a list of requests, each {"properties": {...}, "body": ...}: the
// application properties (operation, type, name, and an operation's parameters, such as
// getStatistics' "statistics" list) and the body. They are sent one after the other on a
// link to $management, each answered on a dynamic receiver named as its reply-to; each
// answer is printed as one JSON line {statusCode, statusDescription, body} in typed JSON.
// Exits 0 once every request is answered, 1 on a timeout (10 s) or an error.

const { fail, connect, fromAmqp } = require('./common.js');

const [url, requestsJson] = process.argv.slice(2);
if (requestsJson === undefined) fail('usage: node management.js URL REQUESTS_JSON', 2);
const requests = JSON.parse(requestsJson);
const timer = setTimeout(() => fail('management: timed out'), 10000);

let sender = null;
let replyTo = null;
let next = 0;

function sendNext() {
  const request = requests[next];
  sender.send({
    reply_to: replyTo,
    correlation_id: `request-${next}`,
    application_properties: request.properties,
    body: request.body === undefined ? null : request.body,
  });
}

const connection = connect({ url }, {
  receiver_open(context) {
    replyTo = context.receiver.source.address;  // the dynamic node the broker made
    sender = context.connection.open_sender('$management');
  },
  sendable(context) {
    if (context.sender === sender && next === 0 && replyTo !== null && requests.length) {
      sendNext();
    }
  },
  message(context) {
    const message = context.message;
    const properties = message.application_properties || {};
    process.stdout.write(JSON.stringify({
      correlation_id: message.correlation_id,
      statusCode: properties.statusCode,
      statusDescription: properties.statusDescription === undefined
        ? null : properties.statusDescription,
      body: fromAmqp(message.body === undefined ? null : message.body),
    }) + '\n');
    next += 1;
    if (next < requests.length) {
      sendNext();
    } else {
      clearTimeout(timer);
      context.connection.close();
    }
  },
});
connection.open_receiver({ source: { dynamic: true }, credit_window: 10 });
