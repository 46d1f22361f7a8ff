// KMS keys: one wraps the data keys of secrets (envelope encryption), one is the controller that signs
// user operations for the accounts the service operates (secp256k1, Sign with MessageType DIGEST).
export const secretsKey = new aws.kms.Key("SecretsKey", {
  description: "Wraps the data keys of workflow secrets",
  enableKeyRotation: true,
  deletionWindowInDays: 7,
});

export const controllerKey = new aws.kms.Key("ControllerKey", {
  description: "Controller that signs user operations for smart wallets",
  customerMasterKeySpec: "ECC_SECG_P256K1",
  keyUsage: "SIGN_VERIFY",
  deletionWindowInDays: 30,
});

/** IAM statements a function needs to use the keys. */
export const keyPermissions = {
  secrets: { actions: ["kms:GenerateDataKey", "kms:Decrypt", "kms:DescribeKey"], resources: [secretsKey.arn] },
  controller: { actions: ["kms:Sign", "kms:GetPublicKey"], resources: [controllerKey.arn] },
};
