/**
 * Address rules for outbound channel targets (CH-1, no SSRF): which IP addresses a
 * webhook may never reach unless an operator allows it, and the operator's allow-list of
 * hostnames and CIDR ranges.
 *
 * Pure functions over address text: no DNS, no sockets. The webhook channel applies them
 * twice: to literal IPs in a target URL when the target is validated, and to every address
 * a hostname resolves to at connect time (so DNS rebinding cannot slip past).
 */
import { isIP } from "node:net";
import { ValidationError } from "../errors/index.js";

/** An IP range: family, the address as an integer, and the prefix length in bits. */
interface Cidr {
  family: 4 | 6;
  base: bigint;
  bits: number;
}

/** Parses dotted-quad IPv4 text into a 32-bit integer, or `null`. */
function parseIPv4(text: string): bigint | null {
  const parts = text.split(".");
  if (parts.length !== 4) return null;
  let value = 0n;
  for (const part of parts) {
    if (!/^\d{1,3}$/.test(part)) return null;
    const n = Number(part);
    if (n > 255) return null;
    value = (value << 8n) | BigInt(n);
  }
  return value;
}

/** Parses IPv6 text (with `::`, an embedded dotted IPv4 tail or a `%zone`) into a 128-bit integer. */
function parseIPv6(text: string): bigint | null {
  let s = text;
  const zone = s.indexOf("%");
  if (zone >= 0) s = s.slice(0, zone);
  if (isIP(s) !== 6) return null;
  const lastColon = s.lastIndexOf(":");
  const tail = s.slice(lastColon + 1);
  if (tail.includes(".")) {
    const v4 = parseIPv4(tail);
    if (v4 === null) return null;
    s = `${s.slice(0, lastColon + 1)}${(v4 >> 16n).toString(16)}:${(v4 & 0xffffn).toString(16)}`;
  }
  const halves = s.split("::");
  if (halves.length > 2) return null;
  const head = halves[0] ? halves[0].split(":") : [];
  const rest = halves.length === 2 && halves[1] ? halves[1].split(":") : [];
  const missing = 8 - head.length - rest.length;
  if (halves.length === 2 ? missing < 1 : missing !== 0) return null;
  const groups = [...head, ...Array<string>(halves.length === 2 ? missing : 0).fill("0"), ...rest];
  let value = 0n;
  for (const group of groups) {
    if (!/^[0-9a-fA-F]{1,4}$/.test(group)) return null;
    value = (value << 16n) | BigInt(parseInt(group, 16));
  }
  return value;
}

/** Parses an IP literal (IPv4, or IPv6 with or without brackets). */
function parseIp(text: string): { family: 4 | 6; value: bigint } | null {
  const bare = text.startsWith("[") && text.endsWith("]") ? text.slice(1, -1) : text;
  const v4 = parseIPv4(bare);
  if (v4 !== null) return { family: 4, value: v4 };
  const v6 = parseIPv6(bare);
  if (v6 !== null) return { family: 6, value: v6 };
  return null;
}

function cidr(text: string): Cidr {
  const parsed = parseCidr(text);
  if (!parsed) throw new Error(`bad built-in CIDR ${text}`);
  return parsed;
}

/**
 * Parses `a.b.c.d/n`, `x:y::/n` or a bare IP (a /32 or /128). Host bits are ignored.
 * @returns the range, or `null` when the text is not an IP range.
 */
function parseCidr(text: string): Cidr | null {
  const slash = text.indexOf("/");
  const addr = slash < 0 ? text : text.slice(0, slash);
  const ip = parseIp(addr);
  if (!ip) return null;
  const max = ip.family === 4 ? 32 : 128;
  let bits = max;
  if (slash >= 0) {
    const prefix = text.slice(slash + 1);
    if (!/^\d{1,3}$/.test(prefix)) return null;
    bits = Number(prefix);
    if (bits > max) return null;
  }
  return { family: ip.family, base: ip.value, bits };
}

function contains(range: Cidr, family: 4 | 6, value: bigint): boolean {
  if (range.family !== family) return false;
  const width = family === 4 ? 32n : 128n;
  const shift = width - BigInt(range.bits);
  return value >> shift === range.base >> shift;
}

/**
 * IPv4 ranges no webhook may reach by default: "this network", RFC 1918 private, CGNAT,
 * loopback, link-local (cloud metadata at 169.254.169.254), IETF protocol assignments,
 * documentation, benchmarking, 6to4 relay anycast, multicast, reserved and broadcast.
 */
const FORBIDDEN_V4 = [
  "0.0.0.0/8",
  "10.0.0.0/8",
  "100.64.0.0/10",
  "127.0.0.0/8",
  "169.254.0.0/16",
  "172.16.0.0/12",
  "192.0.0.0/24",
  "192.0.2.0/24",
  "192.88.99.0/24",
  "192.168.0.0/16",
  "198.18.0.0/15",
  "198.51.100.0/24",
  "203.0.113.0/24",
  "224.0.0.0/4",
  "240.0.0.0/4",
].map(cidr);

/**
 * IPv6 ranges refused outright: unspecified, loopback and IPv4-compatible (all in ::/96),
 * IPv4-translated (`::ffff:0:a.b.c.d`, RFC 2765), local-use NAT64, discard-only, Teredo,
 * benchmarking, ORCHID, documentation, SRv6 SIDs, unique-local, link-local, site-local and
 * multicast.
 */
const FORBIDDEN_V6 = [
  "::/96",
  "::ffff:0:0:0/96",
  "2001:2::/48",
  "5f00::/16",
  "64:ff9b:1::/48",
  "100::/64",
  "2001::/32",
  "2001:10::/28",
  "2001:20::/28",
  "2001:db8::/32",
  "3fff::/20",
  "fc00::/7",
  "fe80::/10",
  "fec0::/10",
  "ff00::/8",
].map(cidr);

/** IPv6 ranges that carry an IPv4 address: judged by the IPv4 address inside. */
const V4_MAPPED = cidr("::ffff:0:0/96");
const NAT64 = cidr("64:ff9b::/96");
const SIX_TO_FOUR = cidr("2002::/16");

/** The IPv4 address an IPv6 address stands for (mapped, NAT64, 6to4), if any. */
function embeddedV4(value: bigint): bigint | null {
  if (contains(V4_MAPPED, 6, value) || contains(NAT64, 6, value)) return value & 0xffffffffn;
  if (contains(SIX_TO_FOUR, 6, value)) return (value >> 80n) & 0xffffffffn;
  return null;
}

/**
 * Whether an IP address lies in a range a webhook must not reach by default: private,
 * loopback, link-local, unique-local, CGNAT, multicast, unspecified, reserved,
 * documentation, and IPv6 forms that embed such an IPv4 address (`::ffff:127.0.0.1`,
 * NAT64, 6to4).
 *
 * @param address IPv4 or IPv6 text (brackets and `%zone` accepted).
 * @returns true for a forbidden address, and for text that is not an IP address at all
 *   (fail closed).
 */
export function isForbiddenAddress(address: string): boolean {
  const ip = parseIp(address);
  if (!ip) return true;
  if (ip.family === 4) return FORBIDDEN_V4.some((r) => contains(r, 4, ip.value));
  const v4 = embeddedV4(ip.value);
  if (v4 !== null) return FORBIDDEN_V4.some((r) => contains(r, 4, v4));
  return FORBIDDEN_V6.some((r) => contains(r, 6, ip.value));
}

/** Whether `text` is an IP literal (IPv4, or IPv6 with or without brackets). */
export function isIpLiteral(text: string): boolean {
  return parseIp(text) !== null;
}

/** Whether a hostname is `localhost` or under `.localhost` (always loopback, RFC 6761). */
export function isLocalhostName(hostname: string): boolean {
  const h = normalizeHost(hostname);
  return h === "localhost" || h.endsWith(".localhost");
}

function normalizeHost(hostname: string): string {
  return hostname.toLowerCase().replace(/\.$/, "");
}

/**
 * An operator's allow-list of targets that may be reached even when private: exact
 * hostnames (`hooks.internal`), leading-wildcard hostnames (`*.svc.cluster.local`,
 * subdomains only), IP addresses and CIDR ranges (`10.1.0.0/16`, `fd00::/8`).
 */
export class TargetAllowlist {
  private readonly hosts = new Set<string>();
  private readonly suffixes: string[] = [];
  private readonly ranges: Cidr[] = [];

  /**
   * @param entries hostnames, `*.` wildcards, IPs or CIDRs.
   * @throws ValidationError (field `allowlist.<i>`) for an entry that is none of these.
   */
  constructor(entries: readonly string[] = []) {
    for (const [i, raw] of entries.entries()) {
      const entry = raw.trim();
      const range = parseCidr(entry);
      if (range) {
        this.ranges.push(range);
      } else if (entry.startsWith("*.") && isHostname(entry.slice(2))) {
        this.suffixes.push(normalizeHost(entry.slice(1)));
      } else if (isHostname(entry)) {
        this.hosts.add(normalizeHost(entry));
      } else {
        throw new ValidationError({
          field: `allowlist.${i}`,
          message: "not a hostname, IP address or CIDR range",
          value: raw,
        });
      }
    }
  }

  /** True when the list is empty. */
  get empty(): boolean {
    return this.hosts.size === 0 && this.suffixes.length === 0 && this.ranges.length === 0;
  }

  /** Whether a URL hostname (not an IP) is allow-listed by name. */
  allowsHost(hostname: string): boolean {
    const h = normalizeHost(hostname);
    return this.hosts.has(h) || this.suffixes.some((suffix) => h.endsWith(suffix));
  }

  /** Whether an IP address is inside an allow-listed range. */
  allowsAddress(address: string): boolean {
    const ip = parseIp(address);
    if (!ip) return false;
    if (this.ranges.some((r) => contains(r, ip.family, ip.value))) return true;
    if (ip.family === 6) {
      const v4 = embeddedV4(ip.value);
      if (v4 !== null && contains(V4_MAPPED, 6, ip.value)) {
        return this.ranges.some((r) => contains(r, 4, v4));
      }
    }
    return false;
  }
}

function isHostname(text: string): boolean {
  return /^(?=.{1,253}\.?$)([a-z0-9_]([a-z0-9_-]{0,61}[a-z0-9_])?)(\.[a-z0-9_]([a-z0-9_-]{0,61}[a-z0-9_])?)*\.?$/i.test(
    text,
  );
}
