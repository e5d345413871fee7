'use strict';
// rhea sender: node send.js URL ADDRESS COUNT [--spec FILE] [--capabilities a,b]
//   [--dynamic-node-properties JSON] [--print-attach]
// Message i is spec[i % spec.length], a JSON list of {id, subject, body, properties,
// durable} in
// typed JSON; without --spec, body "message-i" and properties {index: i}. Exits 0 once every
// message is settled `accepted`, 1 on any other outcome, error or timeout.

const {
  parseArgs, fail, terminus, connect, toAmqp, attachInfo, describe,
} = require('./common.js');

const opts = parseArgs(process.argv.slice(2));
let sent = 0;
let accepted = 0;

function messageAt(index) {
  const spec = opts.spec ? opts.spec[index % opts.spec.length]
    : { body: `message-${index}`, properties: { index } };
  const message = { message_id: spec.id === undefined ? `msg-${index}` : spec.id,
                    body: toAmqp(spec.body === undefined ? null : spec.body) };
  if (spec.subject !== undefined) message.subject = spec.subject;
  if (spec.properties) message.application_properties = toAmqp(spec.properties);
  if (spec.durable) message.durable = true;  // header.durable
  return message;
}

const timer = setTimeout(() => fail(`send: timed out, ${accepted} of ${opts.count} accepted`),
                         opts.timeout * 1000);

const connection = connect(opts, {
  sender_open: (context) => {
    if (opts.printAttach) console.log(JSON.stringify({ attach: attachInfo(context.sender.remote.attach.target) }));
  },
  sendable: (context) => {
    while (context.sender.sendable() && sent < opts.count) context.sender.send(messageAt(sent++));
  },
  accepted: () => {
    if (++accepted === opts.count) {
      clearTimeout(timer);
      connection.close();
    }
  },
  rejected: (context) => fail(`send: rejected: ${JSON.stringify(context.delivery.remote_state)}`),
  released: () => fail('send: a message was released'),
  modified: () => fail('send: a message was modified'),
  sender_error: (context) => fail(`send: link error: ${describe(context.sender.error)}`),
});
connection.open_sender({ target: terminus(opts) });
