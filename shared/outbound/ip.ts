/**
 * Which addresses outbound HTTP from restApi and graphqlQuery may connect to (API.md §8.4.5): anything that
 * reaches the host itself, its network or the cloud's metadata service is refused unless the deployment sets
 * `allow_private_network`.
 *
 * IPv4 is a deny list of the special-purpose ranges (RFC 6890 and successors). IPv6 is an allow list: only
 * global unicast (2000::/3) minus its special blocks; the forms that carry an IPv4 address (mapped, NAT64,
 * 6to4) are judged by that address. Node built-ins only: `net.isIP` says which family, the rest is arithmetic.
 */
import { isIP } from "node:net";

/** [first address as a 32-bit number, prefix length, what it is]. */
const V4_REFUSED: [number, number, string][] = [
  [v4("0.0.0.0"), 8, "unspecified"],
  [v4("10.0.0.0"), 8, "private"],
  [v4("100.64.0.0"), 10, "shared (CGNAT)"],
  [v4("127.0.0.0"), 8, "loopback"],
  [v4("169.254.0.0"), 16, "link-local"],
  [v4("172.16.0.0"), 12, "private"],
  [v4("192.0.0.0"), 24, "reserved"],
  [v4("192.0.2.0"), 24, "documentation"],
  [v4("192.88.99.0"), 24, "reserved"],
  [v4("192.168.0.0"), 16, "private"],
  [v4("198.18.0.0"), 15, "reserved"],
  [v4("198.51.100.0"), 24, "documentation"],
  [v4("203.0.113.0"), 24, "documentation"],
  [v4("224.0.0.0"), 4, "multicast"],
  [v4("240.0.0.0"), 4, "reserved"], // includes 255.255.255.255, broadcast
];

/** Host names refused before any lookup: the metadata services' names and RFC 6761's `localhost`. */
const REFUSED_NAMES = new Set(["localhost", "metadata", "metadata.google.internal", "metadata.goog", "instance-data"]);

function v4(dotted: string): number {
  const parts = dotted.split(".").map(Number);
  return ((parts[0]! << 24) | (parts[1]! << 16) | (parts[2]! << 8) | parts[3]!) >>> 0;
}

function inV4(addr: number, base: number, prefix: number): boolean {
  const mask = prefix === 0 ? 0 : (~0 << (32 - prefix)) >>> 0;
  return (addr & mask) >>> 0 === (base & mask) >>> 0;
}

function v4Refusal(addr: number): string | undefined {
  if (addr === v4("169.254.169.254")) return "cloud metadata";
  for (const [base, prefix, what] of V4_REFUSED) if (inV4(addr, base, prefix)) return what;
  return undefined;
}

/** The eight 16-bit groups of an IPv6 address in any textual form (`::`, embedded dotted IPv4, zone id). */
function parseIPv6(text: string): number[] | undefined {
  let s = text.replace(/^\[|\]$/g, "");
  const zone = s.indexOf("%");
  if (zone >= 0) s = s.slice(0, zone);
  if (isIP(s) !== 6) return undefined;
  const lastColon = s.lastIndexOf(":");
  const dotted = s.slice(lastColon + 1);
  if (dotted.includes(".")) {
    const n = v4(dotted);
    s = `${s.slice(0, lastColon + 1)}${(n >>> 16).toString(16)}:${(n & 0xffff).toString(16)}`;
  }
  const halves = s.split("::");
  const groups = (part: string | undefined) => (part ? part.split(":").map((x) => parseInt(x, 16)) : []);
  const head = groups(halves[0]);
  const rest = halves.length > 1 ? groups(halves[1]) : [];
  const fill = 8 - head.length - rest.length;
  if (fill < 0 || (halves.length === 1 && fill !== 0)) return undefined;
  return [...head, ...new Array<number>(fill).fill(0), ...rest];
}

function v6Refusal(g: number[]): string | undefined {
  const embedded = (hi: number, lo: number) => v4Refusal(((hi << 16) | lo) >>> 0);
  const zeros = (from: number, to: number) => g.slice(from, to).every((x) => x === 0);
  if (zeros(0, 8)) return "unspecified";
  if (zeros(0, 7) && g[7] === 1) return "loopback";
  // ::ffff:a.b.c.d (IPv4-mapped) and ::ffff:0:a.b.c.d (IPv4-translated): the IPv4 address is the destination.
  if (zeros(0, 5) && g[5] === 0xffff) return embedded(g[6]!, g[7]!);
  if (zeros(0, 4) && g[4] === 0xffff && g[5] === 0) return embedded(g[6]!, g[7]!);
  if (zeros(0, 6)) return "IPv4-compatible (deprecated)";
  // 64:ff9b::/96, the NAT64 well-known prefix: the gateway forwards to the embedded IPv4 address.
  if (g[0] === 0x64 && g[1] === 0xff9b && zeros(2, 6)) return embedded(g[6]!, g[7]!);
  if (g[0] === 0x64 && g[1] === 0xff9b && g[2] === 1) return "local-use NAT64";
  // 2002::/16, 6to4: the relay forwards to the IPv4 address in bits 16 to 48.
  if (g[0] === 0x2002) return embedded(g[1]!, g[2]!);
  if ((g[0]! & 0xfe00) === 0xfc00) return g[0] === 0xfd00 && g[1] === 0xec2 ? "cloud metadata" : "unique-local";
  if ((g[0]! & 0xffc0) === 0xfe80) return "link-local";
  if ((g[0]! & 0xff00) === 0xff00) return "multicast";
  if ((g[0]! & 0xe000) !== 0x2000) return "reserved";
  if (g[0] === 0x2001 && g[1] === 0x0db8) return "documentation";
  if (g[0] === 0x2001 && g[1]! < 0x0200) return "reserved"; // 2001::/23, IETF protocol assignments (Teredo...)
  return undefined;
}

/**
 * Why connecting to this IP address is refused ("loopback", "private", "cloud metadata"...), or undefined
 * when it is a public address. A string that is not an IP address is refused ("not an IP address").
 */
export function addressRefusal(address: string): string | undefined {
  const family = isIP(address);
  if (family === 4) return v4Refusal(v4(address));
  const groups = parseIPv6(address);
  if (groups) return v6Refusal(groups);
  return "not an IP address";
}

/** Why this host name is refused before it is even looked up, or undefined. Case and a final dot ignored. */
export function hostnameRefusal(hostname: string): string | undefined {
  const name = hostname.toLowerCase().replace(/\.$/, "");
  if (REFUSED_NAMES.has(name)) return name === "localhost" ? "loopback" : "cloud metadata";
  if (name.endsWith(".localhost")) return "loopback";
  return undefined;
}
