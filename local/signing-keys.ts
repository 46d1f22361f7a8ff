/**
 * Keys the local runtime generates once into DATA_DIR (never into the repo): the ES256 token-signing key
 * and the controller key that signs user operations. Created with mode 0600; reused on every start,
 * so tokens and wallets stay valid across restarts.
 */
import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { generateKeyPairSync, randomBytes } from "node:crypto";

function loadOrCreate(path: string, create: () => string): string {
  if (existsSync(path)) return readFileSync(path, "utf8").trim();
  const value = create();
  writeFileSync(path, value + "\n", { mode: 0o600, flag: "wx" });
  return value;
}

export function localKeys(dataDir: string) {
  const dir = join(dataDir, "keys");
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  const jwtSigningKeyPem = loadOrCreate(join(dir, "jwt-es256.pem"), () =>
    generateKeyPairSync("ec", { namedCurve: "P-256" }).privateKey.export({ format: "pem", type: "pkcs8" }).toString(),
  );
  const controllerPrivateKey = loadOrCreate(join(dir, "controller.key"), () => `0x${randomBytes(32).toString("hex")}`) as `0x${string}`;
  return { jwtSigningKeyPem, controllerPrivateKey };
}
