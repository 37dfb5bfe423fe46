// Preloaded (`node --import`) into every process the documentation test starts: a
// connection to anything but this machine fails at once, so an example that names a
// public host (hooks.example.com, example.com) can never send traffic beyond loopback.
// - DNS: only `localhost` (and `*.localhost`) resolve; any other name fails ENOTFOUND;
// - sockets: a TCP connect to an IP literal outside 127.0.0.0/8 and ::1 fails ECONNREFUSED.
import dns from "node:dns";
import { syncBuiltinESMExports } from "node:module";
import net from "node:net";

const isLocalName = (host) =>
  typeof host === "string" && (host === "localhost" || host.endsWith(".localhost"));

/** Loopback IP literals (also IPv4-mapped IPv6) and local names. */
function isLoopback(host) {
  if (isLocalName(host)) return true;
  const h = String(host).replace(/^\[|\]$/g, "");
  if (h === "::1") return true;
  const v4 = h.startsWith("::ffff:") ? h.slice(7) : h;
  return net.isIPv4(v4) && v4.startsWith("127.");
}

function refused(code, host) {
  const err = new Error(`${code} ${host}: the documentation test allows loopback only`);
  err.code = code;
  err.hostname = host;
  return err;
}

const lookup = dns.lookup;
dns.lookup = function guardedLookup(hostname, options, callback) {
  const cb = typeof options === "function" ? options : callback;
  if (isLocalName(hostname) || (net.isIP(hostname) && isLoopback(hostname))) {
    return lookup.call(dns, hostname, options, callback);
  }
  process.nextTick(cb, refused("ENOTFOUND", hostname));
  return undefined;
};

const promisesLookup = dns.promises.lookup;
dns.promises.lookup = async function guardedPromisesLookup(hostname, options) {
  if (isLocalName(hostname) || (net.isIP(hostname) && isLoopback(hostname))) {
    return promisesLookup.call(dns.promises, hostname, options);
  }
  throw refused("ENOTFOUND", hostname);
};

const connect = net.Socket.prototype.connect;
net.Socket.prototype.connect = function guardedConnect(...args) {
  const first = args[0];
  const options = Array.isArray(first) ? first[0] : first;
  let host;
  if (options && typeof options === "object") {
    host = options.path === undefined ? (options.host ?? "localhost") : null;
  } else if (typeof first === "number" || /^\d+$/.test(String(first))) {
    host = typeof args[1] === "string" ? args[1] : "localhost";
  } else {
    host = null; // a pipe or Unix socket path
  }
  if (host !== null && net.isIP(String(host).replace(/^\[|\]$/g, "")) && !isLoopback(host)) {
    process.nextTick(() => this.destroy(refused("ECONNREFUSED", host)));
    return this;
  }
  return connect.apply(this, args);
};

// The ES module views of node:dns and node:dns/promises pick up the guarded functions.
syncBuiltinESMExports();
