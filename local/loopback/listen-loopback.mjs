/**
 * Preload (`node --import <this file> script.js`) that keeps every TCP server of a Node process on the
 * loopback interface. The Alto bundler hard-codes `fastify.listen({ port, host: "0.0.0.0" })` and has no host
 * option; with this preload, that listen (and any other one in the process) binds 127.0.0.1 instead.
 *
 * A `listen` naming no host, the wildcard ("0.0.0.0", "::", "") or any other non-loopback host is given
 * 127.0.0.1; loopback hosts (127.0.0.0/8, ::1, localhost) and Unix socket paths, pipes and handles are left
 * as they are. It patches `net.Server.prototype.listen`, which `http`, `https` and fastify all go through.
 */
import net from "node:net";

const LOOPBACK = "127.0.0.1";

/** True for hosts that resolve to the loopback interface only. */
export function isLoopbackHost(host) {
  if (typeof host !== "string") return false;
  const h = host.toLowerCase().replace(/^\[|\]$/g, "");
  return h === "localhost" || h === "::1" || /^127\.\d+\.\d+\.\d+$/.test(h) || /^::ffff:127\.\d+\.\d+\.\d+$/.test(h);
}

const isPort = (value) => typeof value === "number" || (typeof value === "string" && value !== "" && /^\d+$/.test(value));

/** The arguments of a `listen` call, with a non-loopback TCP host replaced by 127.0.0.1. */
export function loopbackListenArgs(args) {
  const [first, ...rest] = args;
  if (first !== null && typeof first === "object") {
    // listen(options[, cb]); options with `path`, `handle`, `fd` or `_handle` are not TCP ports to bind.
    if ("path" in first || "handle" in first || "fd" in first || "_handle" in first) return args;
    if (isLoopbackHost(first.host)) return args;
    return [{ ...first, host: LOOPBACK }, ...rest];
  }
  if (first === undefined || typeof first === "function" || isPort(first)) {
    // listen([port[, host[, backlog]]][, cb])
    const port = typeof first === "function" || first === undefined ? 0 : first;
    const afterPort = typeof first === "function" ? args : rest;
    if (typeof afterPort[0] === "string") {
      if (isLoopbackHost(afterPort[0])) return args;
      return [port, LOOPBACK, ...afterPort.slice(1)];
    }
    return [port, LOOPBACK, ...afterPort];
  }
  return args; // listen(path), listen(handle): not a TCP port
}

const listen = net.Server.prototype.listen;
net.Server.prototype.listen = function listenOnLoopback(...args) {
  return listen.apply(this, loopbackListenArgs(args));
};
