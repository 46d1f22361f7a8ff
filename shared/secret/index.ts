export * as Secret from "./secret";
