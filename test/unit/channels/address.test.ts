import { describe, expect, it } from "vitest";
import { isForbiddenAddress, TargetAllowlist } from "../../../src/channels/index.js";

describe("target addresses", () => {
  it.each([
    "127.0.0.1",
    "127.255.0.9",
    "10.0.0.1",
    "172.16.5.4",
    "172.31.255.255",
    "192.168.0.1",
    "169.254.169.254",
    "100.64.0.1",
    "0.0.0.0",
    "224.0.0.1",
    "255.255.255.255",
    "198.18.0.1",
    "::",
    "::1",
    "[::1]",
    "::ffff:127.0.0.1",
    "::ffff:7f00:1",
    "::ffff:10.0.0.1",
    "::ffff:169.254.169.254",
    "64:ff9b::a00:1",
    "2002:c0a8:0101::1",
    "fd00::1",
    "fc12:3456::1",
    "fe80::1",
    "fe80::1%eth0",
    "ff02::1",
    "2001:db8::1",
    "not-an-ip",
  ])("CH-1: %s is forbidden", (address) => {
    expect(isForbiddenAddress(address)).toBe(true);
  });

  it.each([
    "8.8.8.8",
    "93.184.216.34",
    "172.32.0.1",
    "100.128.0.1",
    "2606:4700::1111",
    "::ffff:8.8.8.8",
    "64:ff9b::808:808",
  ])("CH-1: %s is public", (address) => {
    expect(isForbiddenAddress(address)).toBe(false);
  });

  it("CH-1: the allow-list matches names, wildcards, addresses and ranges", () => {
    const list = new TargetAllowlist([
      "hooks.internal",
      "*.svc.local",
      "10.1.0.0/16",
      "fd00::/8",
      "192.168.1.5",
    ]);
    expect(list.allowsHost("HOOKS.internal.")).toBe(true);
    expect(list.allowsHost("a.svc.local")).toBe(true);
    expect(list.allowsHost("svc.local")).toBe(false);
    expect(list.allowsHost("evilhooks.internal")).toBe(false);
    expect(list.allowsAddress("10.1.200.3")).toBe(true);
    expect(list.allowsAddress("10.2.0.1")).toBe(false);
    expect(list.allowsAddress("::ffff:10.1.0.1")).toBe(true);
    expect(list.allowsAddress("fd12::1")).toBe(true);
    expect(list.allowsAddress("192.168.1.5")).toBe(true);
    expect(list.allowsAddress("192.168.1.6")).toBe(false);
  });
});

describe("special IPv6 ranges (CH-1)", () => {
  it.each([
    "::ffff:0:127.0.0.1",
    "::ffff:0:7f00:1",
    "[::ffff:0:10.0.0.1]",
    "::ffff:0:8.8.8.8",
    "2001:2::1",
    "5f00::1",
  ])("CH-1: %s (IPv4-translated, benchmarking, SRv6) is refused", (address) => {
    expect(isForbiddenAddress(address)).toBe(true);
  });
});
