// Deployment secrets, set per stage with `sst secret set <Name> <value> --stage <stage>`.
/** PKCS#8 PEM of the ES256 key that signs access tokens. */
export const jwtSigningKey = new sst.Secret("JwtSigningKey");
/** JSON array of chain settings (rpcUrl, bundlerUrl, factory, paymaster per chainId): see README. */
export const chains = new sst.Secret("Chains", "[]");
