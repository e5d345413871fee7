'use strict';
// rhea receiver: node receive.js URL ADDRESS COUNT [--timeout SECONDS] [--browse]
//   [--credit N] [--capabilities a,b] [--dynamic-node-properties JSON] [--print-attach]
// Prints each message as one JSON line {id, subject, body, properties} in typed JSON and
// accepts it. Exits 0 after COUNT messages, 1 on timeout (default 10 s) or error.
// --browse sets source distribution_mode 'copy'; --credit is the prefetch window;
// --print-attach first prints {"attach": {...}}, the source the broker answered with.
// --idle S: exit 0 once no message has come for S seconds (COUNT is then an upper bound),
// for competing consumers that cannot know their share in advance.
// --outcome reject|modified-failed|release settles each message so instead of accepting it
// (reject carries the error app:invalid "cannot process"); --print-annotations adds the
// message annotations to each line.

const {
  parseArgs, fail, terminus, connect, fromAmqp, attachInfo, describe,
} = require('./common.js');

const opts = parseArgs(process.argv.slice(2));
let received = 0;

const timer = setTimeout(
  () => fail(`receive: timed out after ${received} of ${opts.count} messages`),
  opts.timeout * 1000);

let idleTimer = null;
function stillBusy() {
  if (!opts.idle) return;
  clearTimeout(idleTimer);
  idleTimer = setTimeout(finish, opts.idle * 1000);
}

const source = terminus(opts);
if (opts.browse) source.distribution_mode = 'copy';

const connection = connect(opts, {
  receiver_open: (context) => {
    if (opts.printAttach) console.log(JSON.stringify({ attach: attachInfo(context.receiver.remote.attach.source) }));
    if (opts.count === 0) finish();
    stillBusy();
  },
  message: (context) => {
    if (received >= opts.count) return;  // prefetched beyond COUNT: left unsettled
    const m = context.message;
    const line = {
      id: m.message_id === undefined ? null : m.message_id,
      subject: m.subject === undefined ? '' : m.subject,
      body: fromAmqp(m.body),
      properties: fromAmqp(m.application_properties || {}),
    };
    if (opts.printAnnotations) line.annotations = fromAmqp(m.message_annotations || {});
    console.log(JSON.stringify(line));
    settle(context.delivery);
    stillBusy();
    if (++received === opts.count) finish();
  },
  receiver_error: (context) => fail(`receive: link error: ${describe(context.receiver.error)}`),
});

function settle(delivery) {
  if (opts.outcome === 'reject') delivery.reject({ condition: 'app:invalid', description: 'cannot process' });
  else if (opts.outcome === 'modified-failed') delivery.modified({ delivery_failed: true });
  else if (opts.outcome === 'release') delivery.release();
  else delivery.accept();
}

function finish() {
  clearTimeout(timer);
  clearTimeout(idleTimer);
  connection.close();
}

connection.open_receiver({ source, credit_window: opts.credit, autoaccept: false });
