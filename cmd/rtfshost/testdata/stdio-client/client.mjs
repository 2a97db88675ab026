// The TypeScript SDK's stdio client against rtfshost serve --stdio: it
// launches the command given as arguments (with this process's
// environment), lists the tools, calls rtfs.eval, and prints one line of
// JSON with what it saw. TestServeStdioTypeScript runs it.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";

const [command, ...args] = process.argv.slice(2);
const transport = new StdioClientTransport({ command, args, env: { ...process.env }, stderr: "inherit" });
const client = new Client({ name: "ts-stdio-check", version: "1.0.0" });
await client.connect(transport);
const tools = await client.listTools();
const res = await client.callTool({ name: "rtfs.eval", arguments: { program: "(println \"to the log\") (* 6 7)" } });
const bad = await client.callTool({ name: "rtfs.eval", arguments: { program: "(+ 1" } });
console.log(JSON.stringify({
  server: client.getServerVersion(),
  tools: tools.tools.map((t) => t.name).sort(),
  result: res.structuredContent,
  isError: res.isError ?? false,
  badIsError: bad.isError ?? false,
  badText: bad.content?.[0]?.text ?? "",
}));
await client.close();
