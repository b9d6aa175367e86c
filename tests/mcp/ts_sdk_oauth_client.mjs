// The official TypeScript SDK's client doing the OAuth flow against a toolweave server with
// auth: 401 -> protected resource metadata -> authorization server metadata -> dynamic client
// registration -> authorization code with PKCE (the "browser" is a fetch that reads the
// redirect) -> token -> calls; then a 403 insufficient_scope on one tool -> authorization
// again with the scope it names -> the call. Prints what it saw as JSON.
// Run from a directory whose node_modules holds @modelcontextprotocol/sdk:
//   node ts_sdk_oauth_client.mjs <mcp url>
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { UnauthorizedError } from "@modelcontextprotocol/sdk/client/auth.js";

const url = new URL(process.argv[2]);
const redirectUrl = "http://127.0.0.1:1/callback"; // never fetched: the code is read off the redirect
const store = { info: undefined, tokens: undefined, verifier: undefined, pending: undefined };
const provider = {
  redirectUrl,
  clientMetadata: {
    client_name: "ts-oauth-client",
    redirect_uris: [redirectUrl],
    grant_types: ["authorization_code", "refresh_token"],
    response_types: ["code"],
    token_endpoint_auth_method: "none",
    scope: "files:read",
  },
  clientInformation: () => store.info,
  saveClientInformation: (info) => { store.info = info; },
  tokens: () => store.tokens,
  saveTokens: (tokens) => { store.tokens = tokens; },
  redirectToAuthorization: (authorizationUrl) => { store.pending = authorizationUrl; },
  saveCodeVerifier: (verifier) => { store.verifier = verifier; },
  codeVerifier: () => store.verifier,
};

let authorizations = 0;
async function authorize(transport) {
  // the user agent: the authorization server approves at once and redirects with the code
  const response = await fetch(store.pending, { redirect: "manual" });
  const location = new URL(response.headers.get("location"));
  authorizations += 1;
  await transport.finishAuth(location.searchParams.get("code"));
}

async function connect() {
  for (let attempt = 0; attempt < 3; attempt++) {
    const transport = new StreamableHTTPClientTransport(url, { authProvider: provider });
    const client = new Client({ name: "ts-oauth-client", version: "1.0.0" }, { capabilities: {} });
    try {
      await client.connect(transport);
      return { client, transport };
    } catch (e) {
      if (!(e instanceof UnauthorizedError)) throw e;
      await authorize(transport);
    }
  }
  throw new Error("could not connect");
}

async function call(session, name, args) {
  try {
    return await session.client.callTool({ name, arguments: args });
  } catch (e) {
    if (!(e instanceof UnauthorizedError)) throw e;
    await authorize(session.transport); // step-up: authorized again for the scope named
    return await session.client.callTool({ name, arguments: args });
  }
}

const session = await connect();
const before = await call(session, "whoami", {});
const deleted = await call(session, "delete_file", { name: "ts.txt" });
const after = await call(session, "whoami", {});
console.log(
  JSON.stringify({
    before: JSON.parse(before.content[0].text),
    deleted: deleted.content[0].text,
    after: JSON.parse(after.content[0].text),
    authorizations,
    client_id: store.info.client_id,
  }),
);
await session.client.close();
