/**
 * Baseline for functions/core.ts (health, sign-in, JWKS, the catch-all): hono, the DynamoDB client and
 * document client (health's DescribeTable, sign-in's rate limit), the KMS client (health's DescribeKey),
 * jose (issue tokens, the JWKS), valibot, and what sign-in needs to recover a personal_sign signer
 * (@noble/curves secp256k1 + @noble/hashes keccak-256). Not included: the OpenAPI document and its
 * generator (@valibot/to-json-schema), which the core function serves but a floor does not need.
 */
import { Hono } from "hono";
import { handle } from "hono/aws-lambda";
import { DescribeTableCommand, DynamoDBClient } from "@aws-sdk/client-dynamodb";
import { DynamoDBDocumentClient, UpdateCommand } from "@aws-sdk/lib-dynamodb";
import { DescribeKeyCommand, KMSClient } from "@aws-sdk/client-kms";
import { SignJWT, exportJWK, importPKCS8 } from "jose";
import { secp256k1 } from "@noble/curves/secp256k1";
import { keccak_256 } from "@noble/hashes/sha3";
import { bytesToHex, concatBytes, hexToBytes, utf8ToBytes } from "@noble/hashes/utils";
import * as v from "valibot";

const dynamo = new DynamoDBClient({});
const db = DynamoDBDocumentClient.from(dynamo, { marshallOptions: { removeUndefinedValues: true } });
const kms = new KMSClient({});
const Exchange = v.strictObject({
  ownerAddress: v.pipe(v.string(), v.regex(/^0x[0-9a-fA-F]{40}$/)),
  signature: v.string(),
  message: v.string(),
});

const app = new Hono();
app.get("/health", async (c) => {
  await dynamo.send(new DescribeTableCommand({ TableName: "t" }));
  await kms.send(new DescribeKeyCommand({ KeyId: "k" }));
  return c.json({ status: "ok" });
});
app.post("/auth:exchange", async (c) => {
  const body = v.parse(Exchange, await c.req.json());
  const text = utf8ToBytes(body.message);
  const digest = keccak_256(concatBytes(utf8ToBytes(`\x19Ethereum Signed Message:\n${text.length}`), text));
  const sig = hexToBytes(body.signature.slice(2));
  const publicKey = secp256k1.Signature.fromCompact(sig.subarray(0, 64))
    .addRecoveryBit(sig[64]! - 27)
    .recoverPublicKey(digest)
    .toRawBytes(false);
  const signer = `0x${bytesToHex(keccak_256(publicKey.subarray(1)).subarray(-20))}`;
  await db.send(
    new UpdateCommand({
      TableName: "t",
      Key: { pk: signer, sk: "rate" },
      UpdateExpression: "ADD n :one",
      ExpressionAttributeValues: { ":one": 1 },
    }),
  );
  const key = await importPKCS8(process.env.JWT_SIGNING_KEY ?? "", "ES256");
  return c.json({ token: await new SignJWT({}).setProtectedHeader({ alg: "ES256" }).setSubject(signer).sign(key) });
});
app.get("/.well-known/jwks.json", async (c) => {
  const key = await importPKCS8(process.env.JWT_SIGNING_KEY ?? "", "ES256", { extractable: true });
  return c.json({ keys: [await exportJWK(key)] });
});
app.all("*", (c) => c.json({ code: "NOT_FOUND" }, 404));

export const handler = handle(app);
