/**
 * The sandbox invoker signs its Lambda calls itself (shared/sandbox/lambda-invoke.ts, Signature Version 4 with
 * node:crypto): checked against the worked example of AWS's "Create a signed AWS API request" (IAM ListUsers).
 */
import { describe, expect, it } from "vitest";
import { signV4 } from "../../shared/sandbox/lambda-invoke";

describe("Signature Version 4", () => {
  it("signs AWS's documented example exactly", () => {
    const headers = signV4({
      method: "GET",
      url: new URL("https://iam.amazonaws.com/?Action=ListUsers&Version=2010-05-08"),
      headers: { "content-type": "application/x-www-form-urlencoded; charset=utf-8" },
      body: "",
      service: "iam",
      region: "us-east-1",
      credentials: { accessKeyId: "AKIDEXAMPLE", secretAccessKey: "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY" },
      now: new Date("2015-08-30T12:36:00Z"),
    });
    expect(headers["x-amz-date"]).toBe("20150830T123600Z");
    expect(headers.authorization).toBe(
      "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/iam/aws4_request, SignedHeaders=content-type;host;x-amz-date, " +
        "Signature=5d672d79c15b13162d9279b0855cfba6789a8edb4c82c400e06b5924a6f2b5d7",
    );
  });

  it("signs a session token in, as Lambda's temporary credentials need", () => {
    const headers = signV4({
      method: "POST",
      url: new URL("https://lambda.us-east-1.amazonaws.com/2015-03-31/functions/fn/invocations?Qualifier=3"),
      headers: { "content-type": "application/json" },
      body: "{}",
      service: "lambda",
      region: "us-east-1",
      credentials: { accessKeyId: "ASIA", secretAccessKey: "s", sessionToken: "token" },
    });
    expect(headers["x-amz-security-token"]).toBe("token");
    expect(headers.authorization).toContain("SignedHeaders=content-type;host;x-amz-date;x-amz-security-token,");
  });
});
