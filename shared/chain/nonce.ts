/**
 * Per-wallet serialisation of user operations. Operations of one wallet run one after another in this
 * process, each on the next EntryPoint nonce (key 0), so concurrent withdrawals get consecutive nonces.
 * Another process (another Lambda instance) may take a nonce first: the bundler then answers AA25, and
 * the caller re-reads the nonce and retries once.
 */
const tails = new Map<string, Promise<unknown>>();
const lastUsed = new Map<string, bigint>();

/**
 * Runs `fn` after every earlier operation of the same wallet has settled. `fn` may extend the lock past its
 * own answer with `hold(promise)`: a sent operation keeps later ones waiting until it is included, so they are
 * validated against the state it leaves (a deployed account, the next nonce) instead of a bundler queue.
 */
export function withWalletLock<T>(wallet: string, fn: (hold: (until: Promise<unknown>) => void) => Promise<T>): Promise<T> {
  const previous = tails.get(wallet) ?? Promise.resolve();
  let held: Promise<unknown> = Promise.resolve();
  const hold = (until: Promise<unknown>) => {
    held = until.catch(() => undefined);
  };
  const run = previous.then(() => fn(hold));
  const tail = run.then(
    () => held,
    () => held,
  );
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
