#!/usr/bin/env node
// The TCP proxy of `npm run chaos` (scripts/chaos.mjs forks it; not a product part):
// workers reach PostgreSQL through it, so the run can cut every connection at once.
//
// Listens on 127.0.0.1 (any free port) and pipes each connection to 127.0.0.1:--target.
// IPC (process.send): sends { type: "listening", port } once; on { type: "reset" } it
// destroys every open socket pair with a TCP RST (as a failing network or a restarted
// load balancer would) and answers { type: "reset", dropped }; answers { type: "stats" }
// with { type: "stats", open, accepted } (open now, accepted so far); on { type: "stop" }
// closes and exits 0. New connections are accepted again right after a reset.
import { connect, createServer } from "node:net";

const args = process.argv.slice(2);
const i = args.indexOf("--target");
const targetPort = i >= 0 ? Number(args[i + 1]) : NaN;
if (!Number.isInteger(targetPort) || targetPort <= 0) {
  console.error("usage: chaos-proxy.mjs --target PORT");
  process.exit(2);
}

/** Open pairs: client socket → upstream socket. */
const pairs = new Map();
let accepted = 0;

function drop(client) {
  const upstream = pairs.get(client);
  pairs.delete(client);
  for (const socket of [client, upstream]) {
    if (!socket || socket.destroyed) continue;
    if (typeof socket.resetAndDestroy === "function") socket.resetAndDestroy();
    else socket.destroy();
  }
}

const server = createServer((client) => {
  const upstream = connect({ host: "127.0.0.1", port: targetPort });
  pairs.set(client, upstream);
  accepted += 1;
  client.setNoDelay(true);
  upstream.setNoDelay(true);
  client.pipe(upstream);
  upstream.pipe(client);
  const end = () => drop(client);
  client.on("error", end);
  upstream.on("error", end);
  client.on("close", end);
  upstream.on("close", end);
});

server.listen(0, "127.0.0.1", () => {
  const address = server.address();
  process.send?.({ type: "listening", port: typeof address === "object" ? address.port : 0 });
});

function stop() {
  for (const client of [...pairs.keys()]) drop(client);
  server.close(() => process.exit(0));
  setTimeout(() => process.exit(0), 1_000).unref();
}

process.on("message", (msg) => {
  if (msg?.type === "reset") {
    const dropped = pairs.size;
    for (const client of [...pairs.keys()]) drop(client);
    process.send?.({ type: "reset", dropped });
  }
  if (msg?.type === "stats") process.send?.({ type: "stats", open: pairs.size, accepted });
  if (msg?.type === "stop") stop();
});
process.on("disconnect", stop);
process.on("SIGTERM", stop);
process.on("SIGINT", () => undefined);
