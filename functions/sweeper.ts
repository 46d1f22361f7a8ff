/** Scheduled worker: follows pending withdrawals up with the bundler (API.md §11.6). */
import "./bootstrap";
import { followUpPending } from "../shared/wallet/withdraw";

export const handler = async () => followUpPending();
