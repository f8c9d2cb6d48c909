/**
 * Loaded with `node --require` before the conformance suite (tests/test_conformance.py):
 * every request the suite sends to the server under test carries
 * `Authorization: Bearer $NOTELOOM_CONFORMANCE_TOKEN`.
 *
 * The suite's server scenarios have no option for a header, and noteloom serve answers
 * no request without a token (there is no token-free mode, not even on loopback, and
 * none is added for tests). The suite sends through two functions: the global `fetch`
 * (the SDK client and the SSE checks) and undici's `request` (the DNS-rebinding check);
 * both are wrapped here. Only requests to NOTELOOM_CONFORMANCE_URL's origin get the
 * header, and a header the suite sets itself is left as it is.
 */
"use strict";

const token = process.env.NOTELOOM_CONFORMANCE_TOKEN;
const target = process.env.NOTELOOM_CONFORMANCE_URL;
if (!token || !target) {
  throw new Error("bearer.cjs needs NOTELOOM_CONFORMANCE_TOKEN and NOTELOOM_CONFORMANCE_URL");
}
const origin = new URL(target).origin;
const value = `Bearer ${token}`;

function ours(url) {
  try {
    return new URL(url instanceof Request ? url.url : String(url)).origin === origin;
  } catch {
    return false;
  }
}

function withAuth(headers) {
  const out = new Headers(headers ?? {});
  if (!out.has("authorization")) out.set("authorization", value);
  return out;
}

const fetched = globalThis.fetch;
globalThis.fetch = function fetchWithBearer(input, init) {
  if (!ours(input)) return fetched(input, init);
  if (input instanceof Request && init === undefined) {
    return fetched(new Request(input, { headers: withAuth(input.headers) }));
  }
  return fetched(input, { ...init, headers: withAuth(init?.headers) });
};

// undici is CommonJS: the suite's `import { request } from "undici"` reads this export
// when the suite loads, after this file has replaced it.
const undici = require(require.resolve("undici", { paths: [__dirname] }));
const requested = undici.request;
undici.request = function requestWithBearer(url, options, ...rest) {
  if (!ours(url)) return requested.call(this, url, options, ...rest);
  const headers = { ...(options?.headers ?? {}) };
  if (!Object.keys(headers).some((k) => k.toLowerCase() === "authorization")) headers.authorization = value;
  return requested.call(this, url, { ...options, headers }, ...rest);
};
