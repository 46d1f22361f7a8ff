/**
 * Baseline for functions/wallets.ts: hono, the DynamoDB client and document client, the KMS client (the
 * controller key signs user operations), jose (token verification), valibot, and the parts of viem that
 * wallet work cannot do without: a public client reading contracts, ABI encoding, and a bundler client
 * that hashes, packs and sends a v0.7 user operation. Not included: our contract artifacts (bytecode).
 */
import { Hono } from "hono";
import { handle } from "hono/aws-lambda";
import { DynamoDBClient } from "@aws-sdk/client-dynamodb";
import { DynamoDBDocumentClient, PutCommand, QueryCommand } from "@aws-sdk/lib-dynamodb";
import { KMSClient, SignCommand } from "@aws-sdk/client-kms";
import { importSPKI, jwtVerify } from "jose";
import * as v from "valibot";
import { createPublicClient, encodeFunctionData, getAddress, hashMessage, http, parseAbi, toHex, type Address, type Hex } from "viem";
import {
  createBundlerClient,
  entryPoint07Abi,
  entryPoint07Address,
  getUserOperationHash,
  toPackedUserOperation,
} from "viem/account-abstraction";

const db = DynamoDBDocumentClient.from(new DynamoDBClient({}), { marshallOptions: { removeUndefinedValues: true } });
const kms = new KMSClient({});
// Per chain and built on first use, as shared/chain/chains.ts does (http() needs a URL at construction).
let clients: { client: ReturnType<typeof createPublicClient>; bundler: ReturnType<typeof createBundlerClient> } | undefined;
function chain() {
  if (!clients) {
    const client = createPublicClient({ transport: http(process.env.RPC_URL ?? "http://127.0.0.1:8545") });
    clients = { client, bundler: createBundlerClient({ client, transport: http(process.env.BUNDLER_URL ?? "http://127.0.0.1:4337") }) };
  }
  return clients;
}
const factoryAbi = parseAbi([
  "function getAddress(address owner, uint256 salt) view returns (address)",
  "function execute(address to, uint256 value, bytes data)",
]);
const Create = v.object({ salt: v.pipe(v.string(), v.regex(/^\d+$/)), chainId: v.optional(v.number()) });
const Withdraw = v.object({
  recipientAddress: v.pipe(v.string(), v.regex(/^0x[0-9a-fA-F]{40}$/)),
  amount: v.pipe(v.string(), v.regex(/^\d+$/)),
});

const app = new Hono();
app.use(async (c, next) => {
  await jwtVerify((c.req.header("authorization") ?? "").slice(7), await importSPKI(process.env.PUBLIC_KEY ?? "", "ES256"));
  await next();
});
app.get("/wallets", async (c) => {
  const page = await db.send(
    new QueryCommand({ TableName: "t", KeyConditionExpression: "pk = :p", ExpressionAttributeValues: { ":p": "x" } }),
  );
  return c.json({ items: page.Items ?? [] });
});
app.post("/wallets", async (c) => {
  const body = v.parse(Create, await c.req.json());
  const { client } = chain();
  const address = await client.readContract({
    address: process.env.FACTORY as Address,
    abi: factoryAbi,
    functionName: "getAddress",
    args: [process.env.OWNER as Address, BigInt(body.salt)],
  });
  await db.send(new PutCommand({ TableName: "t", Item: { pk: "x", sk: address } }));
  return c.json({ address: getAddress(address) }, 201);
});
app.post("/wallets/:address/withdraw", async (c) => {
  const body = v.parse(Withdraw, await c.req.json());
  const sender = getAddress(c.req.param("address"));
  const { client, bundler } = chain();
  const nonce = await client.readContract({
    address: entryPoint07Address,
    abi: entryPoint07Abi,
    functionName: "getNonce",
    args: [sender, 0n],
  });
  const callData = encodeFunctionData({
    abi: factoryAbi,
    functionName: "execute",
    args: [body.recipientAddress as Address, BigInt(body.amount), "0x"],
  });
  const gas = {
    callGasLimit: 100_000n,
    verificationGasLimit: 100_000n,
    preVerificationGas: 50_000n,
    maxFeePerGas: 1n,
    maxPriorityFeePerGas: 1n,
  };
  const userOp = { sender, nonce, callData, ...gas, signature: "0x" as Hex };
  const hash = getUserOperationHash({
    userOperation: userOp,
    entryPointAddress: entryPoint07Address,
    entryPointVersion: "0.7",
    chainId: 1,
  });
  const signed = await kms.send(
    new SignCommand({
      KeyId: "k",
      Message: Buffer.from(hashMessage({ raw: hash }).slice(2), "hex"),
      MessageType: "DIGEST",
      SigningAlgorithm: "ECDSA_SHA_256",
    }),
  );
  const signature = toHex(signed.Signature ?? new Uint8Array());
  void toPackedUserOperation({ ...userOp, signature });
  const sent = await bundler.request({
    method: "eth_sendUserOperation",
    params: [
      {
        ...userOp,
        nonce: toHex(nonce),
        signature,
        callGasLimit: "0x1",
        verificationGasLimit: "0x1",
        preVerificationGas: "0x1",
        maxFeePerGas: "0x1",
        maxPriorityFeePerGas: "0x1",
      },
      entryPoint07Address,
    ],
  });
  return c.json({ userOpHash: sent }, 202);
});

export const handler = handle(app);
