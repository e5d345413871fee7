'use strict';
// What send.js and receive.js share: the command line, the connection, and "typed JSON".
//
// Typed JSON is the value contract shared with the Proton C++ and Python clients: null,
// booleans, strings, lists and string-keyed maps are themselves; {"$binary": "<hex>"} is
// binary and {"$symbol": "s"} a symbol. Numbers are JavaScript numbers: rhea sends a whole
// number as an AMQP integer and anything else as a double, and every AMQP number arrives as
// a number, so 2.0 and 2 look alike here (the tests use doubles with a fraction).

const rhea = require('rhea');

const USAGE = `usage: node send.js URL ADDRESS COUNT [--spec FILE] [options]
       node receive.js URL ADDRESS COUNT [--timeout SECONDS] [--idle SECONDS] [--browse] [--credit N] [options]
options: --capabilities a,b  --dynamic-node-properties JSON  --print-attach  --replay-period SECONDS
         --selector TEXT  --headers-filter JSON (a headers-exchange binding)  --tls-ca FILE (connect with TLS, trusting the CAs in FILE)
         --user NAME (SASL PLAIN as NAME, with the password in $INTEROP_PASSWORD)
         receive only: --outcome reject|modified-failed|release  --print-annotations`;

function parseArgs(argv) {
  const [url, address, count, ...rest] = argv;
  if (count === undefined || isNaN(Number(count))) fail(USAGE, 2);
  const opts = { url, address, count: Number(count), timeout: 10, credit: 100 };
  for (let i = 0; i < rest.length; i++) {
    const name = rest[i];
    const next = () => {
      if (i + 1 >= rest.length) fail(`${name} needs a value`, 2);
      return rest[++i];
    };
    if (name === '--spec') opts.spec = JSON.parse(require('fs').readFileSync(next(), 'utf8'));
    else if (name === '--timeout') opts.timeout = Number(next());
    else if (name === '--credit') opts.credit = Number(next());
    else if (name === '--idle') opts.idle = Number(next());
    else if (name === '--browse') opts.browse = true;
    else if (name === '--capabilities') opts.capabilities = next().split(',');
    else if (name === '--dynamic-node-properties') opts.dynamicNodeProperties = JSON.parse(next());
    else if (name === '--print-attach') opts.printAttach = true;
    else if (name === '--replay-period') opts.replayPeriod = next();
    else if (name === '--selector') opts.selector = next();
    else if (name === '--headers-filter') opts.headersFilter = JSON.parse(next());
    else if (name === '--tls-ca') opts.tlsCa = next();
    else if (name === '--user') opts.user = next();
    else if (name === '--outcome') opts.outcome = next();
    else if (name === '--print-annotations') opts.printAnnotations = true;
    else fail(`unknown option ${name}\n${USAGE}`, 2);
  }
  if (opts.user !== undefined) opts.password = password();
  return opts;
}

// The password for --user: from the environment, so that it is not on the command line.
function password() {
  const value = process.env.INTEROP_PASSWORD;
  if (value === undefined) fail('--user needs the password in INTEROP_PASSWORD', 2);
  return value;
}

function fail(text, status = 1) {
  process.stderr.write(text + '\n');
  process.exit(status);
}

// The terminus fields a Qpid user sets to create a queue of a given kind on demand.
function terminus(opts) {
  const t = { address: opts.address };
  if (opts.capabilities) t.capabilities = opts.capabilities;
  if (opts.dynamicNodeProperties) t.dynamic_node_properties = opts.dynamicNodeProperties;
  if (opts.replayPeriod !== undefined) {
    // Our mapping of Broker-J's replay period: a described source filter.
    t.filter = { 'x-qpid-replay-period': rhea.types.wrap_described(
      rhea.types.wrap_string(opts.replayPeriod),
      rhea.types.wrap_symbol('apache.org:x-qpid-replay-period:string')) };
  }
  if (opts.selector !== undefined) {
    // rhea's own JMS selector filter (key jms-selector, the numeric descriptor), as Qpid JMS.
    t.filter = Object.assign(t.filter || {}, rhea.filter.selector(opts.selector));
  }
  if (opts.headersFilter !== undefined) {
    // The legacy headers binding (qpidd's filter for a headers exchange): a described map.
    t.filter = Object.assign(t.filter || {}, { headers: rhea.types.wrap_described(
      rhea.types.wrap_map(opts.headersFilter),
      rhea.types.wrap_symbol('apache.org:legacy-amqp-headers-binding:map')) });
  }
  return t;
}

// A link or connection error as text: rhea's error objects carry an AMQP condition.
function describe(error) {
  if (!error) return 'none';
  if (error.condition) return `${error.condition}: ${error.description || ''}`;
  return String(error);
}

function connect(opts, handlers) {
  const url = new URL(opts.url);
  const container = rhea.create_container();
  for (const [event, handler] of Object.entries(handlers)) container.on(event, handler);
  let opened = false;
  container.on('connection_open', () => { opened = true; });
  container.on('error', (event) => {
    // rhea hands the error itself to 'error' listeners (a ConnectionError with a condition)
    const error = event && event.error ? event.error : event;
    fail(`error: ${error}` + (error && error.condition ? ` (${error.condition})` : ''));
  });
  container.on('disconnected', (context) => {
    if (context.error) fail(`disconnected: ${context.error}`);
    // A broker that refuses a client before opening may just close the socket.
    if (!opened) fail('disconnected: the broker closed the connection without opening it');
  });
  const options = { host: url.hostname, port: Number(url.port || 5672), reconnect: false };
  if (opts.user !== undefined) {
    // rhea offers SASL PLAIN when given a username and a password (ANONYMOUS otherwise).
    Object.assign(options, { username: opts.user, password: opts.password });
  }
  if (opts.tlsCa !== undefined) {
    // AMQPS: node's TLS, checking the broker's certificate against the given CAs and name.
    Object.assign(options, { transport: 'tls', ca: [require('fs').readFileSync(opts.tlsCa)],
                             servername: url.hostname });
  }
  return container.connect(options);
}

function isTag(value, tag) {
  return value !== null && typeof value === 'object' && !Array.isArray(value) &&
    !Buffer.isBuffer(value) && Object.keys(value).length === 1 && tag in value;
}

function toAmqp(value) {
  if (Array.isArray(value)) return value.map(toAmqp);
  if (isTag(value, '$binary')) return Buffer.from(value.$binary, 'hex');
  if (isTag(value, '$symbol')) return rhea.types.wrap_symbol(value.$symbol);
  if (value !== null && typeof value === 'object') {
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, toAmqp(v)]));
  }
  return value;
}

function fromAmqp(value) {
  if (value === undefined) return null;
  if (Buffer.isBuffer(value)) return { $binary: value.toString('hex') };
  if (Array.isArray(value)) return value.map(fromAmqp);
  if (value !== null && typeof value === 'object') {
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, fromAmqp(v)]));
  }
  return value;
}

function attachInfo(terminusFrame) {
  const t = terminusFrame || {};
  return { address: t.address === undefined ? null : t.address,
           capabilities: t.capabilities || [],
           distribution_mode: t.distribution_mode || null,
           dynamic_node_properties: t.dynamic_node_properties || null,
           filter: t.filter ? Object.keys(t.filter) : [] };
}

module.exports = {
  parseArgs, password, fail, terminus, connect, toAmqp, fromAmqp, attachInfo, describe,
};
