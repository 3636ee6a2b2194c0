// Receipts are verified here, in the browser, against the server's JWKS:
// the compact JWS's EdDSA signature over the receipt's canonical JSON.
import { compactVerify, createLocalJWKSet, decodeProtectedHeader } from "jose";

// verifyReceipt answers {ok, kid, payload} for a receipt the JWKS verifies
// and whose listed fields are the signed ones, else {ok: false, kid, reason}.
export async function verifyReceipt(receipt, jwks) {
  let kid = "";
  try {
    kid = decodeProtectedHeader(receipt.jws).kid || "";
  } catch {
    return { ok: false, kid, reason: "the signature is not a JWS" };
  }
  try {
    const keys = createLocalJWKSet(jwks);
    const { payload, protectedHeader } = await compactVerify(receipt.jws, keys, { algorithms: ["EdDSA", "Ed25519"] });
    const signed = JSON.parse(new TextDecoder().decode(payload));
    for (const f of ["id", "agentId", "paymentId", "kind"]) {
      if (signed[f] !== receipt[f]) return { ok: false, kid, reason: `the listed ${f} is not the signed one` };
    }
    if (!signed.amount || signed.amount.cents !== receipt.amount.cents || signed.amount.currency !== receipt.amount.currency) {
      return { ok: false, kid, reason: "the listed amount is not the signed one" };
    }
    return { ok: true, kid: protectedHeader.kid, payload: signed };
  } catch (e) {
    return { ok: false, kid, reason: e && e.code === "ERR_JWKS_NO_MATCHING_KEY" ? "no published key has this kid" : "the signature does not verify" };
  }
}
