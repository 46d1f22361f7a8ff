// KMS keys: one wraps the data keys of secrets (envelope encryption), one is the controller that signs user
// operations for the accounts the service operates (secp256k1, Sign with MessageType DIGEST), one signs access
// tokens (P-256, ES256; the stage's own, created with it: no token key is ever a setting shared between stages).
//
// The signing keys' policies name the roles that may sign (infra/key-policies.ts) and give the account root the
// administration of the key only, no kms:Sign: no IAM policy (an administrator's, the deploy role's) can sign.
//
// The controller key is the owner of every wallet the service registers: its address is the `controller` of each
// chain's ControlledAccountFactory, so it decides wallet addresses and the paymaster's signer. Production owns its
// key; preview stages share one development key, made once per account (docs/deploy.md), so they share wallet
// addresses, factories and paymasters (the `Chains` setting, set once with `--fallback`) instead of each preview
// getting different ones.
import { production } from "./stage";

/** Never deleted with the stage in production: losing the controller key loses control of every wallet. */
const keep = production ? { retainOnDelete: true, protect: true } : {};

/**
 * The token key is replaceable: losing it costs clients a new sign-in, and replacing it is how it rotates (a deploy
 * with the resource renamed). Production leaves the old key in the account for an operator to delete.
 */
const replaceable = production ? { retainOnDelete: true } : {};

export const secretsKey = new aws.kms.Key(
  "SecretsKey",
  { description: `Wraps the data keys of workflow secrets (${$app.stage})`, enableKeyRotation: true, deletionWindowInDays: 7 },
  keep,
);

/** The alias of the development controller key every preview stage signs with. */
export const DEVELOPMENT_CONTROLLER_ALIAS = `alias/${$app.name}/development-controller`;

/** Production's own controller key; previews have none (they share the development key, below). */
const controllerKey = production
  ? new aws.kms.Key(
      "ControllerKey",
      {
        description: "Controller that signs user operations for smart wallets (production)",
        customerMasterKeySpec: "ECC_SECG_P256K1",
        keyUsage: "SIGN_VERIFY",
        deletionWindowInDays: 30,
      },
      keep,
    )
  : undefined;

/** The controller key's id when the stage owns it, for its key policy (infra/key-policies.ts). */
export const ownControllerKeyId = controllerKey?.id;

export const controllerKeyArn: $util.Output<string> = controllerKey
  ? controllerKey.arn
  : aws.kms.getKeyOutput({ keyId: DEVELOPMENT_CONTROLLER_ALIAS }).arn;

/**
 * Signs access tokens for the sign-in function (core) only. Every function verifies with its public half, read at
 * deploy time (`JWT_PUBLIC_KEY`): verifying calls no KMS and needs no KMS client or permission.
 */
export const tokenKey = new aws.kms.Key(
  "TokenKey",
  {
    description: `Signs access tokens, ES256 (${$app.stage})`,
    customerMasterKeySpec: "ECC_NIST_P256",
    keyUsage: "SIGN_VERIFY",
    deletionWindowInDays: 7,
  },
  replaceable,
);

/** SPKI PEM of the token key's public half: what every function verifies tokens with (shared/http/token.ts). */
export const tokenPublicKey = aws.kms.getPublicKeyOutput({ keyId: tokenKey.arn }).publicKeyPem;

/** Verifying tokens (every HTTP function); signing them too (core: sign-in, with kms:Sign below). */
export const tokenEnvironment = {
  verify: { JWT_PUBLIC_KEY: tokenPublicKey },
  sign: { JWT_PUBLIC_KEY: tokenPublicKey, JWT_KMS_KEY_ID: tokenKey.arn },
};

/** IAM statements, one per use of a key. */
export const keyPermissions = {
  /** Sealing a secret: a fresh data key per value (secrets group); a waiting run's state (runner). */
  seal: { actions: ["kms:GenerateDataKey"], resources: [secretsKey.arn] },
  /** Opening secrets for a run (runner; the workflows group while it runs blocking triggers and simulations). */
  open: { actions: ["kms:Decrypt"], resources: [secretsKey.arn] },
  /** GET /health checks that the key answers (core). */
  describe: { actions: ["kms:DescribeKey"], resources: [secretsKey.arn] },
  /** Signing user operations and paymaster data, and the controller's address (wallets, runner: they send). */
  sign: { actions: ["kms:Sign", "kms:GetPublicKey"], resources: [controllerKeyArn] },
  /** Signing access tokens (core). */
  signTokens: { actions: ["kms:Sign"], resources: [tokenKey.arn] },
};

/** What the account root may do with a signing key: administer it (read, describe, change, retire), never use it. */
const KEY_ADMINISTRATION = [
  "kms:CancelKeyDeletion",
  "kms:CreateAlias",
  "kms:DeleteAlias",
  "kms:DescribeKey",
  "kms:DisableKey",
  "kms:EnableKey",
  "kms:GetKeyPolicy",
  "kms:GetKeyRotationStatus",
  "kms:GetPublicKey",
  "kms:ListAliases",
  "kms:ListGrants",
  "kms:ListKeyPolicies",
  "kms:ListResourceTags",
  "kms:PutKeyPolicy",
  "kms:RevokeGrant",
  "kms:ScheduleKeyDeletion",
  "kms:TagResource",
  "kms:UntagResource",
  "kms:UpdateAlias",
  "kms:UpdateKeyDescription",
];

/**
 * The key policy of a signing key: the account root administers it (which also lets IAM grant those actions to the
 * deploy role and administrators), and the roles named, and only they, use it. A separate resource from the key:
 * the roles' own policies name the key, so the key cannot name the roles at its creation (between the two, for the
 * seconds of a stage's first deploy, the key has KMS's default policy, and no function exists yet to sign with it).
 */
export function signingKeyPolicy(
  name: string,
  keyId: $util.Input<string>,
  signers: $util.Input<string>[],
  actions: string[],
  options: { replaceable?: boolean } = {},
) {
  const account = aws.getCallerIdentityOutput().accountId;
  const partition = aws.getPartitionOutput().partition;
  return new aws.kms.KeyPolicy(
    name,
    {
      keyId,
      policy: $jsonStringify({
        Version: "2012-10-17",
        Statement: [
          {
            Sid: "Administration",
            Effect: "Allow",
            Principal: { AWS: $interpolate`arn:${partition}:iam::${account}:root` },
            Action: KEY_ADMINISTRATION,
            Resource: "*",
          },
          { Sid: "Use", Effect: "Allow", Principal: { AWS: signers }, Action: actions, Resource: "*" },
        ],
      }),
    },
    options.replaceable ? replaceable : keep,
  );
}

/** The key ids the runtime reads (shared/config.ts). */
export const keyEnvironment = { SECRETS_KMS_KEY_ID: secretsKey.arn, CONTROLLER_KMS_KEY_ID: controllerKeyArn };
