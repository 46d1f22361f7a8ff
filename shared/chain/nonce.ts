/**
 * Per-wallet serialisation of user operations. Operations of one wallet run one after another in this
 * process, each on the next EntryPoint nonce (key 0), so concurrent withdrawals get consecutive nonces.
 * Another process (another Lambda instance) may take a nonce first: the bundler then answers AA25, and
 * the caller re-reads the nonce and retries once.
 */
const tails = new Map<string, Promise<unknown>>();
const lastUsed = new Map<string, bigint>();

/** Runs `fn` after every earlier operation of the same wallet has settled. */
export function withWalletLock<T>(wallet: string, fn: () => Promise<T>): Promise<T> {
  const previous = tails.get(wallet) ?? Promise.resolve();
  const run = previous.then(fn, fn);
  const tail = run.catch(() => undefined);
  tails.set(wallet, tail);
  void tail.then(() => {
    if (tails.get(wallet) === tail) tails.delete(wallet);
  });
  return run;
}

/** The nonce to use: the chain's, unless an operation this process sent is still ahead of it. */
export function nextNonce(wallet: string, chainNonce: bigint): bigint {
  const last = lastUsed.get(wallet);
  return last !== undefined && last >= chainNonce ? last + 1n : chainNonce;
}

export function markNonceUsed(wallet: string, nonce: bigint) {
  lastUsed.set(wallet, nonce);
}

/** After AA25 or a refused operation: trust the chain again. */
export function forgetNonce(wallet: string) {
  lastUsed.delete(wallet);
}

/** True when a bundler message says the nonce was stale (EntryPoint AA25). */
export const isStaleNonce = (message: string) => /AA25/.test(message);
