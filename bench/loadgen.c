/*
 * loadgen: an AMQP 1.0 load generator (and a trivial fast peer) on Proton's proactor API.
 *
 * One process, one proactor, one thread. The generator opens PRODUCERS producer connections
 * and CONSUMERS consumer connections (-P, -C; one each by default; each with its own session
 * and link, all on the same queue) to a broker and measures messages per second for three
 * scenarios:
 *
 *   a  producers and consumers at once; unsettled sends with at most WINDOW unsettled per
 *      producer, credit CREDIT per consumer topped up at half, every delivery accepted
 *   b  the same, pre-settled both ways (the producers send settled and the consumers' links
 *      ask the broker to send settled)
 *   c  fill COUNT messages with no consumer (sends as in a), then attach the consumers and
 *      drain them (as in a)
 *
 * COUNT is split evenly over the producers; in a and b they start once every consumer is
 * attached. The consumers together never grant more credit than COUNT in all.
 *
 * Every message is the same pre-encoded bytes (a properties section with a message-id and a
 * data section of BODY bytes), encoded once at start, so the generator's per-message cost is
 * only the engine's framing. It prints one RESULT line per measured phase:
 *
 *   RESULT mode=a phase=all count=100000 seconds=3.1 rate=32258 cpu=0.41
 *
 * where cpu is this process's user+system CPU seconds over the phase. In mode c it also
 * prints "PHASE fill-done" (flushed) between the phases so a caller can sample the broker's
 * CPU time there.
 *
 * peer mode: a trivial fast AMQP peer used to measure the generator's own ceiling. It
 * accepts connections (no SASL), grants each incoming link WINDOW credit topped up at half,
 * accepts and settles every transfer on arrival and forwards the bytes to any attached
 * outgoing link with credit (round-robin), keeping what it cannot forward yet in a plain
 * FIFO. No queues, no addresses, no outcomes beyond settling. It prints
 * "listening on HOST:PORT" once ready and runs until killed.
 *
 * Build: bench/build.sh (or bench/run.py, which calls it).
 */

#include <proton/condition.h>
#include <proton/connection.h>
#include <proton/delivery.h>
#include <proton/event.h>
#include <proton/link.h>
#include <proton/listener.h>
#include <proton/message.h>
#include <proton/netaddr.h>
#include <proton/proactor.h>
#include <proton/sasl.h>
#include <proton/session.h>
#include <proton/terminus.h>
#include <proton/transport.h>

#include <getopt.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ---- helpers ------------------------------------------------------------------------- */

static double now_s(clockid_t clock) {
  struct timespec ts;
  clock_gettime(clock, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}
static double wall(void) { return now_s(CLOCK_MONOTONIC); }
static double cpu(void) { return now_s(CLOCK_PROCESS_CPUTIME_ID); }

static void die(const char *what, pn_condition_t *cond) {
  if (cond && pn_condition_is_set(cond))
    fprintf(stderr, "loadgen: %s: %s: %s\n", what, pn_condition_get_name(cond),
            pn_condition_get_description(cond));
  else
    fprintf(stderr, "loadgen: %s\n", what);
  exit(1);
}

/* The first error condition an event carries, if any (remote end first). */
static pn_condition_t *event_condition(pn_event_t *e) {
  pn_link_t *l = pn_event_link(e);
  if (l && pn_condition_is_set(pn_link_remote_condition(l))) return pn_link_remote_condition(l);
  pn_connection_t *c = pn_event_connection(e);
  if (c && pn_condition_is_set(pn_connection_remote_condition(c)))
    return pn_connection_remote_condition(c);
  pn_transport_t *t = pn_event_transport(e);
  if (t && pn_condition_is_set(pn_transport_condition(t))) return pn_transport_condition(t);
  return NULL;
}

/* Receive the current (complete) delivery's bytes into a growable buffer; returns size. */
static size_t recv_all(pn_link_t *link, pn_delivery_t *d, char **buf, size_t *cap) {
  size_t size = pn_delivery_pending(d);
  if (size > *cap) {
    *cap = size * 2;
    *buf = realloc(*buf, *cap);
    if (!*buf) die("out of memory", NULL);
  }
  ssize_t n = pn_link_recv(link, *buf, size);
  return n > 0 ? (size_t)n : 0;
}

/* ---- generator ----------------------------------------------------------------------- */

enum { MODE_A, MODE_B, MODE_C, MODE_FILL };

/* One producer or consumer: its own connection, session and link. */
typedef struct {
  pn_connection_t *conn;
  pn_link_t *link;
  long quota, sent, acked; /* producer: its share of COUNT, and its progress */
} client_t;

typedef struct {
  int mode;
  long count, window, credit;
  const char *addr, *queue, *user, *password;
  bool sasl;
  pn_proactor_t *proactor;
  int nprod, ncons; /* -P, -C */
  client_t *prod, *cons;
  char **msgs;      /* one encoding per group (one in all without -g) */
  size_t *msg_sizes;
  long groups;      /* -g: messages carry properties.group-id, cycling over this many */
  bool ungrouped;   /* -G: ... but the queue is asked for neither groups nor last value */
  long keys;        /* -k: messages carry application property k, cycling over this many,
                       to a last-value queue keyed by it */
  bool durable;     /* -d: durable messages, on a queue declared durable */
  bool fanout;      /* -F: every consumer gets every message (an exchange's subscribers) */
  long expect;      /* messages the consumers receive in all: COUNT, or COUNT x C with -F */
  long sent, acked, received; /* totals over all producers and consumers */
  long cap;         /* credit per consumer: CREDIT, or a fair share of COUNT if smaller */
  long granted;     /* credit granted by all consumers so far, never more than COUNT */
  int attached;     /* consumers attached */
  uint64_t tag;
  bool producing, started, fill_done, done;
  double t0, c0, t1, c1;
  int conns_open;
  char *rbuf;
  size_t rcap;
} gen_t;

static void encode_messages(gen_t *g, size_t body_size) {
  long n = g->groups > 0 ? g->groups : g->keys > 0 ? g->keys : 1;
  g->msgs = calloc((size_t)n, sizeof *g->msgs);
  g->msg_sizes = calloc((size_t)n, sizeof *g->msg_sizes);
  char *body = malloc(body_size);
  memset(body, 'x', body_size);
  for (long i = 0; i < n; i++) {
    pn_message_t *m = pn_message();
    pn_data_t *id = pn_message_id(m);
    pn_data_put_string(id, pn_bytes(11, "loadgen-msg"));
    char group[32];
    if (g->groups > 0) {
      snprintf(group, sizeof group, "group-%ld", i);
      pn_message_set_group_id(m, group);
    }
    if (g->keys > 0) {
      char key[32];
      int len = snprintf(key, sizeof key, "key-%07ld", i);
      pn_data_t *props = pn_message_properties(m);
      pn_data_put_map(props);
      pn_data_enter(props);
      pn_data_put_string(props, pn_bytes(1, "k"));
      pn_data_put_string(props, pn_bytes((size_t)len, key));
      pn_data_exit(props);
    }
    if (g->durable) pn_message_set_durable(m, true);
    pn_message_set_inferred(m, true); /* a binary body becomes a data section */
    pn_data_put_binary(pn_message_body(m), pn_bytes(body_size, body));
    size_t cap = body_size + 256;
    g->msgs[i] = malloc(cap);
    if (pn_message_encode(m, g->msgs[i], &cap)) die("cannot encode the message", NULL);
    g->msg_sizes[i] = cap;
    pn_message_free(m);
  }
  free(body);
}

/* Node properties for the queue: -g asks for shared groups (grouped by
   properties.group-id), -k for a last-value queue keyed by k, -d for a durable queue;
   -G asks for neither groups nor last value (the same messages on a plain queue). */
static void ask_for_groups(gen_t *g, pn_terminus_t *t) {
  bool grouped = g->groups > 0 && !g->ungrouped;
  bool last_value = g->keys > 0 && !g->ungrouped;
  if (!grouped && !g->durable && !last_value) return;
  pn_data_t *props = pn_terminus_properties(t);
  pn_data_put_map(props);
  pn_data_enter(props);
  if (grouped) {
    pn_data_put_symbol(props, pn_bytes(21, "qpid.shared_msg_group"));
    pn_data_put_int(props, 1);
  }
  if (g->durable) {
    pn_data_put_symbol(props, pn_bytes(7, "durable"));
    pn_data_put_bool(props, true);
  }
  if (last_value) {
    pn_data_put_symbol(props, pn_bytes(25, "qpid.last_value_queue_key"));
    pn_data_put_string(props, pn_bytes(1, "k"));
  }
  pn_data_exit(props);
}

static pn_connection_t *connect_to(gen_t *g, const char *container) {
  pn_connection_t *c = pn_connection();
  pn_connection_set_container(c, container);
  if (g->user) pn_connection_set_user(c, g->user);
  if (g->password) pn_connection_set_password(c, g->password);
  pn_transport_t *t = pn_transport();
  if (g->sasl || g->user) {
    pn_sasl_t *s = pn_sasl(t);
    pn_sasl_allowed_mechs(s, g->user ? "PLAIN" : "ANONYMOUS");
    pn_sasl_set_allow_insecure_mechs(s, true);
  }
  pn_connection_open(c);
  pn_proactor_connect2(g->proactor, c, t, g->addr);
  return c;
}

static void start_producer(gen_t *g, client_t *k, int i) {
  char container[64];
  snprintf(container, sizeof container, "loadgen-producer-%d", i + 1);
  k->conn = connect_to(g, container);
  pn_session_t *s = pn_session(k->conn);
  pn_session_open(s);
  k->link = pn_sender(s, "loadgen-sender");
  pn_link_set_context(k->link, k);
  pn_terminus_set_address(pn_link_target(k->link), g->queue);
  ask_for_groups(g, pn_link_target(k->link));
  pn_link_set_snd_settle_mode(k->link, g->mode == MODE_B ? PN_SND_SETTLED : PN_SND_UNSETTLED);
  pn_link_set_rcv_settle_mode(k->link, PN_RCV_FIRST);
  pn_link_open(k->link);
}

/* Producer i sends COUNT / P messages, the first COUNT % P producers one more. */
static void start_producers(gen_t *g) {
  g->producing = true;
  for (int i = 0; i < g->nprod; i++) {
    g->prod[i].quota = g->count / g->nprod + (i < g->count % g->nprod ? 1 : 0);
    start_producer(g, &g->prod[i], i);
  }
}

/* Top a consumer's credit up to the cap, never granting more in all than COUNT. */
static void grant(gen_t *g, client_t *k) {
  long top = g->cap - pn_link_credit(k->link);
  /* (with -F each subscriber gets at most COUNT anyway: no shared budget to keep) */
  if (!g->fanout && top > g->expect - g->granted) top = g->expect - g->granted;
  if (top <= 0) return;
  pn_link_flow(k->link, (int)top);
  g->granted += top;
}

static void start_consumer(gen_t *g, client_t *k, int i) {
  char container[64];
  snprintf(container, sizeof container, "loadgen-consumer-%d", i + 1);
  k->conn = connect_to(g, container);
  pn_session_t *s = pn_session(k->conn);
  pn_session_open(s);
  k->link = pn_receiver(s, "loadgen-receiver");
  pn_link_set_context(k->link, k);
  pn_terminus_set_address(pn_link_source(k->link), g->queue);
  ask_for_groups(g, pn_link_source(k->link));
  pn_link_set_snd_settle_mode(k->link, g->mode == MODE_B ? PN_SND_SETTLED : PN_SND_UNSETTLED);
  pn_link_set_rcv_settle_mode(k->link, PN_RCV_FIRST);
  pn_link_open(k->link);
  grant(g, k);
}

static void start_consumers(gen_t *g) {
  for (int i = 0; i < g->ncons; i++) start_consumer(g, &g->cons[i], i);
}

static void report(gen_t *g, const char *phase, long n, double t0, double c0) {
  double secs = wall() - t0, cpus = cpu() - c0;
  printf("RESULT mode=%c phase=%s count=%ld seconds=%.4f rate=%.0f cpu=%.4f\n",
         "abcf"[g->mode], phase, n, secs, secs > 0 ? (double)n / secs : 0.0, cpus);
  fflush(stdout);
}

/* Groups cycle over the whole run: the run's i-th message sent has group i % GROUPS. */
static void send_some(gen_t *g, client_t *k) {
  pn_link_t *l = k->link;
  bool presettled = g->mode == MODE_B;
  if (!g->started && pn_link_credit(l) > 0) {
    g->started = true;
    g->t0 = wall();
    g->c0 = cpu();
  }
  while (k->sent < k->quota && pn_link_credit(l) > 0 &&
         (presettled || k->sent - k->acked < g->window)) {
    uint64_t tag = g->tag++;
    pn_delivery_t *d = pn_delivery(l, pn_dtag((const char *)&tag, sizeof tag));
    long which = g->groups > 0 ? g->sent % g->groups : g->keys > 0 ? g->sent % g->keys : 0;
    pn_link_send(l, g->msgs[which], g->msg_sizes[which]);
    pn_link_advance(l);
    if (presettled) pn_delivery_settle(d);
    k->sent++;
    g->sent++;
  }
}

/* Close every connection, each from its own event batch (woken for the purpose). */
static void finish(gen_t *g) {
  g->done = true;
  for (int i = 0; i < g->nprod; i++)
    if (g->prod[i].conn) pn_connection_wake(g->prod[i].conn);
  for (int i = 0; i < g->ncons; i++)
    if (g->cons[i].conn) pn_connection_wake(g->cons[i].conn);
}

static void check_done(gen_t *g) {
  if (g->done) return;
  if (g->mode == MODE_FILL) { /* fill only: done once every message is acknowledged */
    if (g->acked == g->count) {
      report(g, "fill", g->count, g->t0, g->c0);
      finish(g);
    }
    return;
  }
  if (g->mode == MODE_C && !g->fill_done) {
    if (g->acked == g->count) {
      g->fill_done = true;
      report(g, "fill", g->count, g->t0, g->c0);
      printf("PHASE fill-done\n");
      fflush(stdout);
      g->t1 = wall();
      g->c1 = cpu();
      start_consumers(g);
    }
    return;
  }
  bool sends_settled = g->mode == MODE_B || g->acked == g->count;
  if (g->received == g->expect && sends_settled) {
    if (g->mode == MODE_C)
      report(g, "drain", g->expect, g->t1, g->c1);
    else
      report(g, "all", g->expect, g->t0, g->c0);
    finish(g);
  }
}

static void on_receiver_delivery(gen_t *g, client_t *k, pn_delivery_t *d) {
  pn_link_t *l = k->link;
  if (!pn_delivery_readable(d) || pn_delivery_partial(d)) return;
  recv_all(l, d, &g->rbuf, &g->rcap);
  pn_link_advance(l);
  if (!pn_delivery_settled(d)) pn_delivery_update(d, PN_ACCEPTED);
  pn_delivery_settle(d);
  g->received++;
  if (2 * pn_link_credit(l) < g->cap) grant(g, k);
  check_done(g);
}

static void on_sender_delivery(gen_t *g, client_t *k, pn_delivery_t *d) {
  if (pn_delivery_updated(d) && pn_delivery_remote_state(d) && pn_delivery_remote_state(d) != PN_ACCEPTED) {
    fprintf(stderr, "loadgen: a transfer was not accepted (state 0x%" PRIx64 ")\n",
            pn_delivery_remote_state(d));
    exit(1);
  }
  if (pn_delivery_settled(d) || pn_delivery_remote_state(d)) {
    pn_delivery_settle(d);
    k->acked++;
    g->acked++;
  }
  send_some(g, k);
  check_done(g);
}

static void on_link_open(gen_t *g, pn_link_t *l) {
  if (pn_link_is_receiver(l)) {
    if (++g->attached == g->ncons && !g->producing) start_producers(g);
  } else if (pn_link_remote_target(l) &&
             pn_terminus_get_type(pn_link_remote_target(l)) == PN_UNSPECIFIED) {
    die("the broker refused a producer link", NULL);
  }
}

static int gen_handle(gen_t *g, pn_event_t *e) {
  switch (pn_event_type(e)) {
  case PN_LINK_REMOTE_OPEN:
    on_link_open(g, pn_event_link(e));
    break;
  case PN_LINK_FLOW:
    if (pn_link_is_sender(pn_event_link(e))) send_some(g, pn_link_get_context(pn_event_link(e)));
    break;
  case PN_DELIVERY: {
    pn_delivery_t *d = pn_event_delivery(e);
    pn_link_t *l = pn_delivery_link(d);
    if (pn_link_is_receiver(l))
      on_receiver_delivery(g, pn_link_get_context(l), d);
    else
      on_sender_delivery(g, pn_link_get_context(l), d);
    break;
  }
  case PN_LINK_REMOTE_CLOSE:
  case PN_LINK_REMOTE_DETACH:
  case PN_CONNECTION_REMOTE_CLOSE:
    if (!g->done) die("the broker closed a link or connection", event_condition(e));
    break;
  case PN_TRANSPORT_CLOSED:
    if (!g->done) die("connection lost", event_condition(e));
    if (--g->conns_open == 0) return 0;
    break;
  case PN_CONNECTION_WAKE:
    if (g->done) pn_connection_close(pn_event_connection(e));
    break;
  case PN_PROACTOR_TIMEOUT:
    fprintf(stderr, "loadgen: timed out: sent=%ld acked=%ld received=%ld\n", g->sent, g->acked,
            g->received);
    exit(2);
  default:
    break;
  }
  return 1;
}

static int run_generator(gen_t *g, size_t body, long timeout_ms) {
  encode_messages(g, body);
  g->prod = calloc((size_t)g->nprod, sizeof *g->prod);
  g->cons = calloc((size_t)g->ncons, sizeof *g->cons);
  if (!g->prod || !g->cons) die("out of memory", NULL);
  g->expect = g->fanout ? g->count * g->ncons : g->count;
  long share = (g->expect + g->ncons - 1) / g->ncons;
  g->cap = g->credit < share ? g->credit : share;
  g->proactor = pn_proactor();
  if (timeout_ms > 0) pn_proactor_set_timeout(g->proactor, timeout_ms);
  g->conns_open = g->nprod + (g->mode == MODE_FILL ? 0 : g->ncons);
  if (g->mode == MODE_C || g->mode == MODE_FILL)
    start_producers(g); /* the consumers come once the queue is full (never with fill) */
  else
    start_consumers(g); /* the producers start once every consumer is attached */
  for (int running = 1; running;) {
    pn_event_batch_t *b = pn_proactor_wait(g->proactor);
    pn_event_t *e;
    while (running && (e = pn_event_batch_next(b))) running = gen_handle(g, e);
    pn_proactor_done(g->proactor, b);
  }
  pn_proactor_free(g->proactor);
  return 0;
}

/* ---- peer ------------------------------------------------------------------------------ */

typedef struct {
  char *data;
  size_t size;
} blob_t;

typedef struct {
  pn_proactor_t *proactor;
  pn_listener_t *listener;
  long window;
  blob_t *fifo; /* ring buffer of messages waiting for an outgoing link with credit */
  size_t head, len, cap;
  pn_link_t **out; /* attached outgoing links */
  size_t nout, outcap, next_out;
  uint64_t tag;
  char *rbuf;
  size_t rcap;
} peer_t;

static void fifo_push(peer_t *p, const char *data, size_t size) {
  if (p->len == p->cap) {
    size_t cap = p->cap ? p->cap * 2 : 4096;
    blob_t *f = malloc(cap * sizeof *f);
    for (size_t i = 0; i < p->len; i++) f[i] = p->fifo[(p->head + i) % p->cap];
    free(p->fifo);
    p->fifo = f;
    p->head = 0;
    p->cap = cap;
  }
  blob_t *b = &p->fifo[(p->head + p->len++) % p->cap];
  b->data = malloc(size);
  memcpy(b->data, data, size);
  b->size = size;
}

static void forget_out(peer_t *p, pn_link_t *l) {
  for (size_t i = 0; i < p->nout; i++)
    if (p->out[i] == l) {
      p->out[i] = p->out[--p->nout];
      return;
    }
}

/* Hand queued messages to the outgoing links of connection c that have credit, round-robin.
 * A connection's engine is only touched while handling that connection's own event batch;
 * other connections are woken (PN_CONNECTION_WAKE) to pump their links themselves. */
static void peer_pump(peer_t *p, pn_connection_t *c) {
  while (p->len && p->nout) {
    pn_link_t *l = NULL;
    for (size_t k = 0; k < p->nout; k++) {
      pn_link_t *o = p->out[(p->next_out + k) % p->nout];
      if (pn_link_credit(o) > 0 && pn_session_connection(pn_link_session(o)) == c) {
        l = o;
        p->next_out = (p->next_out + k + 1) % p->nout;
        break;
      }
    }
    if (!l) return;
    blob_t *b = &p->fifo[p->head];
    uint64_t tag = p->tag++;
    pn_delivery_t *d = pn_delivery(l, pn_dtag((const char *)&tag, sizeof tag));
    pn_link_send(l, b->data, b->size);
    pn_link_advance(l);
    if (pn_link_snd_settle_mode(l) == PN_SND_SETTLED) pn_delivery_settle(d);
    free(b->data);
    p->head = (p->head + 1) % p->cap;
    p->len--;
  }
}

/* Wake every other connection with an outgoing link so it pumps the FIFO. */
static void peer_wake_others(peer_t *p, pn_connection_t *self) {
  for (size_t i = 0; i < p->nout; i++) {
    pn_connection_t *c = pn_session_connection(pn_link_session(p->out[i]));
    if (c != self && pn_link_credit(p->out[i]) > 0) pn_connection_wake(c);
  }
}

static void peer_handle(peer_t *p, pn_event_t *e) {
  switch (pn_event_type(e)) {
  case PN_LISTENER_OPEN: {
    char host[256], port[32];
    pn_netaddr_host_port(pn_listener_addr(p->listener), host, sizeof host, port, sizeof port);
    printf("listening on %s:%s\n", host, port);
    fflush(stdout);
    break;
  }
  case PN_LISTENER_ACCEPT:
    pn_listener_accept2(p->listener, NULL, NULL);
    break;
  case PN_LISTENER_CLOSE:
    die("listener closed", pn_listener_condition(p->listener));
    break;
  case PN_CONNECTION_REMOTE_OPEN:
    pn_connection_set_container(pn_event_connection(e), "loadgen-peer");
    pn_connection_open(pn_event_connection(e));
    break;
  case PN_SESSION_REMOTE_OPEN:
    pn_session_open(pn_event_session(e));
    break;
  case PN_LINK_REMOTE_OPEN: {
    pn_link_t *l = pn_event_link(e);
    pn_terminus_copy(pn_link_source(l), pn_link_remote_source(l));
    pn_terminus_copy(pn_link_target(l), pn_link_remote_target(l));
    pn_link_set_snd_settle_mode(l, pn_link_remote_snd_settle_mode(l));
    pn_link_set_rcv_settle_mode(l, pn_link_remote_rcv_settle_mode(l));
    pn_link_open(l);
    if (pn_link_is_receiver(l)) {
      pn_link_flow(l, (int)p->window);
    } else {
      if (p->nout == p->outcap) {
        p->outcap = p->outcap ? p->outcap * 2 : 16;
        p->out = realloc(p->out, p->outcap * sizeof *p->out);
      }
      p->out[p->nout++] = l;
    }
    break;
  }
  case PN_LINK_FLOW:
    if (pn_link_is_sender(pn_event_link(e))) peer_pump(p, pn_event_connection(e));
    break;
  case PN_CONNECTION_WAKE:
    peer_pump(p, pn_event_connection(e));
    break;
  case PN_DELIVERY: {
    pn_delivery_t *d = pn_event_delivery(e);
    pn_link_t *l = pn_delivery_link(d);
    if (pn_link_is_sender(l)) { /* a consumer's disposition */
      if (pn_delivery_remote_state(d) || pn_delivery_settled(d)) pn_delivery_settle(d);
      break;
    }
    if (!pn_delivery_readable(d) || pn_delivery_partial(d)) break;
    size_t n = recv_all(l, d, &p->rbuf, &p->rcap);
    pn_link_advance(l);
    if (!pn_delivery_settled(d)) pn_delivery_update(d, PN_ACCEPTED);
    pn_delivery_settle(d);
    fifo_push(p, p->rbuf, n);
    if (pn_link_credit(l) < p->window / 2) pn_link_flow(l, (int)p->window - pn_link_credit(l));
    peer_pump(p, pn_event_connection(e));
    if (p->len) peer_wake_others(p, pn_event_connection(e));
    break;
  }
  case PN_LINK_REMOTE_CLOSE:
  case PN_LINK_REMOTE_DETACH:
    forget_out(p, pn_event_link(e));
    pn_link_close(pn_event_link(e));
    break;
  case PN_SESSION_REMOTE_CLOSE:
    pn_session_close(pn_event_session(e));
    break;
  case PN_CONNECTION_REMOTE_CLOSE:
    pn_connection_close(pn_event_connection(e));
    break;
  case PN_TRANSPORT_CLOSED: {
    pn_connection_t *c = pn_event_connection(e);
    for (size_t i = 0; i < p->nout;) {
      if (pn_session_connection(pn_link_session(p->out[i])) == c)
        p->out[i] = p->out[--p->nout];
      else
        i++;
    }
    break;
  }
  default:
    break;
  }
}

static int run_peer(peer_t *p, const char *addr) {
  p->proactor = pn_proactor();
  p->listener = pn_listener();
  pn_proactor_listen(p->proactor, p->listener, addr, 128);
  for (;;) {
    pn_event_batch_t *b = pn_proactor_wait(p->proactor);
    pn_event_t *e;
    while ((e = pn_event_batch_next(b))) peer_handle(p, e);
    pn_proactor_done(p->proactor, b);
  }
  return 0;
}

/* ---- main ------------------------------------------------------------------------------ */

static void usage(FILE *f) {
  fprintf(f,
          "usage: loadgen MODE [options]\n"
          "  MODE: a (send+receive, unsettled), b (pre-settled), c (fill then drain), fill (fill\n"
          "        only: leaves COUNT messages on the queue), peer\n"
          "  -H HOST:PORT  broker address (peer: listen address; port 0 picks one)\n"
          "                [127.0.0.1:5672]\n"
          "  -q QUEUE      queue (address) to use [loadgen]\n"
          "  -n COUNT      messages in all, split evenly over the producers [100000]\n"
          "  -P PRODUCERS  producers, each on its own connection [1]\n"
          "  -C CONSUMERS  consumers, each on its own connection [1]\n"
          "  -w WINDOW     unsettled window per producer (peer: credit per link) [1000]\n"
          "  -c CREDIT     credit per consumer, topped up at half; the consumers together\n"
          "                never grant more than COUNT [1000]\n"
          "  -s BYTES      body size [100]\n"
          "  -S            use SASL ANONYMOUS (PLAIN with -u/-p)\n"
          "  -u USER -p PASSWORD\n"
          "  -t SECONDS    give up after this long [120]\n"
          "  -d            durable messages (header.durable) on a durable queue\n"
          "  -g GROUPS     messages carry properties.group-id, cycling over GROUPS groups in\n"
          "                the order the run sends them (over all producers), and every link\n"
          "                asks for a shared-groups queue (qpid.shared_msg_group)\n"
          "  -G            with -g or -k, the same messages to a plain queue (neither grouped\n"
          "                nor last-value): the baseline for the cost of the queue type itself\n"
          "  -k KEYS       messages carry application property k, cycling over KEYS keys, to\n"
          "                a last-value queue keyed by it (qpid.last_value_queue_key)\n"
          "  -F            fan-out: QUEUE is an exchange and every consumer subscribes, so\n"
          "                each gets every message (COUNT x CONSUMERS delivered, reported)\n");
}

int main(int argc, char **argv) {
  if (argc < 2 || !strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")) {
    usage(argc < 2 ? stderr : stdout);
    return argc < 2 ? 1 : 0;
  }
  const char *mode = argv[1];
  const char *addr = "127.0.0.1:5672", *queue = "loadgen", *user = NULL, *password = NULL;
  long count = 100000, window = 1000, credit = 1000, body = 100, timeout = 120, groups = 0, keys = 0;
  long producers = 1, consumers = 1;
  bool sasl = false, durable = false, ungrouped = false, fanout = false;
  int opt;
  optind = 2;
  while ((opt = getopt(argc, argv, "H:q:n:P:C:w:c:s:Su:p:t:g:GdFk:h")) != -1) {
    switch (opt) {
    case 'H': addr = optarg; break;
    case 'q': queue = optarg; break;
    case 'n': count = atol(optarg); break;
    case 'P': producers = atol(optarg); break;
    case 'C': consumers = atol(optarg); break;
    case 'w': window = atol(optarg); break;
    case 'c': credit = atol(optarg); break;
    case 's': body = atol(optarg); break;
    case 'S': sasl = true; break;
    case 'u': user = optarg; break;
    case 'p': password = optarg; break;
    case 't': timeout = atol(optarg); break;
    case 'g': groups = atol(optarg); break;
    case 'd': durable = true; break;
    case 'G': ungrouped = true; break;
    case 'F': fanout = true; break;
    case 'k': keys = atol(optarg); break;
    default: usage(stderr); return 1;
    }
  }
  if (count <= 0 || window <= 0 || credit <= 0 || body < 0 || producers <= 0 ||
      producers > 10000 || consumers <= 0 || consumers > 10000) {
    usage(stderr);
    return 1;
  }
  if (!strcmp(mode, "peer")) {
    peer_t p = {0};
    p.window = window;
    return run_peer(&p, addr);
  }
  gen_t g = {0};
  if (!strcmp(mode, "a")) g.mode = MODE_A;
  else if (!strcmp(mode, "b")) g.mode = MODE_B;
  else if (!strcmp(mode, "c")) g.mode = MODE_C;
  else if (!strcmp(mode, "fill")) g.mode = MODE_FILL;
  else {
    usage(stderr);
    return 1;
  }
  g.count = count;
  g.window = window;
  g.credit = credit;
  g.nprod = (int)producers;
  g.ncons = (int)consumers;
  g.addr = addr;
  g.queue = queue;
  g.user = user;
  g.password = password;
  g.sasl = sasl;
  g.groups = groups;
  g.durable = durable;
  g.ungrouped = ungrouped;
  g.fanout = fanout;
  g.keys = keys;
  if (keys > 0 && groups > 0) {
    usage(stderr);
    return 1;
  }
  return run_generator(&g, (size_t)body, timeout * 1000);
}
