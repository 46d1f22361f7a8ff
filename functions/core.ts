/** Health, sign-in, JWKS, and the API's catch-all route: every group is mounted so 404/405 are exact. */
import "./bootstrap";
import { handle } from "hono/aws-lambda";
import { createServiceApp } from "../shared/http/service";

export const handler = handle(createServiceApp());
