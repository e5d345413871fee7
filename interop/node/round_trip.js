'use strict';
// What the round-trip clients share: their command line (URL ADDRESS COUNT), the bodies they
// send, a 10-second limit on the whole run, and how they report (one JSON line) or fail.

function parseRoundTrip(script) {
  const [url, address, countText] = process.argv.slice(2);
  const count = Number(countText);
  if (!address || !Number.isInteger(count)) {
    process.stderr.write(`usage: node ${script} URL ADDRESS COUNT\n`);
    process.exit(2);
  }
  setTimeout(() => { process.stderr.write('timed out\n'); process.exit(1); }, 10000).unref();
  const bodies = Array.from({ length: count }, (_, n) => `message-${n}`);
  return { url, address, count, bodies };
}

function report(run) {
  run().then(
    (result) => process.stdout.write(JSON.stringify(result) + '\n'),
    (error) => { process.stderr.write(`error: ${error}\n`); process.exit(1); });
}

module.exports = { parseRoundTrip, report };
