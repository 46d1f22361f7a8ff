// KMS keys: one wraps the data keys of secrets (envelope encryption), one is the controller that signs user
// operations for the accounts the service operates (secp256k1, Sign with MessageType DIGEST).
//
// The controller key is the owner of every wallet the service registers: its address is the `controller` of each
// chain's ControlledAccountFactory, so it decides wallet addresses and the paymaster's signer. Production owns its
// key; preview stages share one development key, made once per account (docs/deploy.md), so they share wallet
// addresses, factories and paymasters (the `Chains` setting, set once with `--fallback`) instead of each preview
// getting different ones.
import { production } from "./stage";

/** Never deleted with the stage in production: losing the controller key loses control of every wallet. */
const keep = production ? { retainOnDelete: true, protect: true } : {};

export const secretsKey = new aws.kms.Key(
  "SecretsKey",
  { description: `Wraps the data keys of workflow secrets (${$app.stage})`, enableKeyRotation: true, deletionWindowInDays: 7 },
  keep,
);

/** The alias of the development controller key every preview stage signs with. */
export const DEVELOPMENT_CONTROLLER_ALIAS = `alias/${$app.name}/development-controller`;

export const controllerKeyArn: $util.Output<string> = production
  ? new aws.kms.Key(
      "ControllerKey",
      {
        description: "Controller that signs user operations for smart wallets (production)",
        customerMasterKeySpec: "ECC_SECG_P256K1",
        keyUsage: "SIGN_VERIFY",
        deletionWindowInDays: 30,
      },
      keep,
    ).arn
  : aws.kms.getKeyOutput({ keyId: DEVELOPMENT_CONTROLLER_ALIAS }).arn;

/** IAM statements, one per use of a key. */
export const keyPermissions = {
  /** Sealing a secret: a fresh data key per value (secrets group); a waiting run's state (runner). */
  seal: { actions: ["kms:GenerateDataKey"], resources: [secretsKey.arn] },
  /** Opening secrets for a run (runner; the workflows group while it runs blocking triggers and simulations). */
  open: { actions: ["kms:Decrypt"], resources: [secretsKey.arn] },
  /** GET /health checks that the key answers (core). */
  describe: { actions: ["kms:DescribeKey"], resources: [secretsKey.arn] },
  /** Signing user operations and paymaster data, and the controller's address. */
  sign: { actions: ["kms:Sign", "kms:GetPublicKey"], resources: [controllerKeyArn] },
};

/** The key ids the runtime reads (shared/config.ts). */
export const keyEnvironment = { SECRETS_KMS_KEY_ID: secretsKey.arn, CONTROLLER_KMS_KEY_ID: controllerKeyArn };
