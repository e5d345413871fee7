'use strict';
// What the round-trip clients share: their command line (URL ADDRESS COUNT [--user NAME]),
// the bodies they send, a 10-second limit on the whole run, and how they report (one JSON
// line) or fail. --user NAME authenticates as NAME with SASL PLAIN, the password coming from
// the environment variable INTEROP_PASSWORD (never from the command line).

function parseRoundTrip(script) {
  const [url, address, countText, ...rest] = process.argv.slice(2);
  const count = Number(countText);
  const usage = () => {
    process.stderr.write(`usage: node ${script} URL ADDRESS COUNT [--user NAME]\n`);
    process.exit(2);
  };
  if (!address || !Number.isInteger(count)) usage();
  let user;
  let password;
  for (let i = 0; i < rest.length; i++) {
    if (rest[i] === '--user' && i + 1 < rest.length) user = rest[++i];
    else usage();
  }
  if (user !== undefined) {
    password = process.env.INTEROP_PASSWORD;
    if (password === undefined) {
      process.stderr.write('--user needs the password in INTEROP_PASSWORD\n');
      process.exit(2);
    }
  }
  setTimeout(() => { process.stderr.write('timed out\n'); process.exit(1); }, 10000).unref();
  const bodies = Array.from({ length: count }, (_, n) => `message-${n}`);
  return { url, address, count, bodies, user, password };
}

function report(run) {
  run().then(
    (result) => process.stdout.write(JSON.stringify(result) + '\n'),
    (error) => { process.stderr.write(`error: ${error}\n`); process.exit(1); });
}

module.exports = { parseRoundTrip, report };
