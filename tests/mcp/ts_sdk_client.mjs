// The official TypeScript SDK's client against a toolweave server: lists the tools and calls
// them, printing what it saw as JSON. Run from a directory whose node_modules holds
// @modelcontextprotocol/sdk: node ts_sdk_client.mjs <url>
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const client = new Client({ name: "ts-sdk-client", version: "1.0.0" }, { capabilities: {} });
await client.connect(new StreamableHTTPClientTransport(new URL(process.argv[2])));
const { tools } = await client.listTools();
const weather = await client.callTool({ name: "weather", arguments: { city: "Oslo" } });
const progress = [];
const counted = await client.callTool(
  { name: "count", arguments: { to: 3 } },
  undefined,
  { onprogress: (p) => progress.push(p.progress) },
);
const failed = await client.callTool({ name: "weather", arguments: {} });
// A tool whose value breaks its outputSchema: the client must be able to accept the result.
const broken = await client
  .callTool({ name: "stats", arguments: { key: "k" } })
  .catch((e) => ({ thrown: String(e) }));
console.log(
  JSON.stringify({ tools, weather, counted, progress, failed, broken, server: client.getServerVersion() }),
);
await client.close();
