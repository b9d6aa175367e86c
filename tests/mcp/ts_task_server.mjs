// A server with task-augmented tools, on the official TypeScript SDK's experimental tasks
// (@modelcontextprotocol/sdk), over stdio (node ts_task_server.mjs) or streamable HTTP on
// 127.0.0.1 (node ts_task_server.mjs http PORT; a session per client).
// Task tools (execution.taskSupport "required" unless said): wait (completes after `ms`,
// pollInterval `poll` ms, status notifications sent), fail (ends failed, isError), crash
// (ends failed with no result: tasks/result answers a JSON-RPC error), ask_model
// (input_required: asks the client's model), ask
// (input_required: elicits a colour), count (progress under the call's token), maybe
// ("optional": says whether it ran as a task). task_log (a plain tool) lists every task
// the server created, with its status now. With NO_TASKS_CAPABILITY=1 the server does not
// declare tasks.requests.tools.call (its task tools then cannot be called).
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { StdioServerTransport } from "@modelcontextprotocol/sdk/server/stdio.js";
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js";
import { randomUUID } from "node:crypto";
import { createServer } from "node:http";
import {
  InMemoryTaskMessageQueue,
  InMemoryTaskStore,
} from "@modelcontextprotocol/sdk/experimental/tasks";
import { CreateMessageResultSchema, ElicitResultSchema } from "@modelcontextprotocol/sdk/types.js";
import { z } from "zod";

const taskStore = new InMemoryTaskStore();
const taskMessageQueue = new InMemoryTaskMessageQueue();
const created = []; // { tool, taskId, ttl }

function makeServer() {
  const server = new McpServer(
    { name: "ts-tasks", version: "1.0.0" },
    {
      capabilities: process.env.NO_TASKS_CAPABILITY
        ? {}
        : { tasks: { list: {}, cancel: {}, requests: { tools: { call: {} } } } },
      taskStore,
      taskMessageQueue,
    },
  );

  const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
  const text = (t, isError = false) => ({ content: [{ type: "text", text: t }], isError });

  async function start(tool, extra, pollInterval, work) {
    const task = await extra.taskStore.createTask({ ttl: extra.taskRequestedTtl, pollInterval });
    created.push({ tool, taskId: task.taskId, ttl: extra.taskRequestedTtl ?? null });
    work(task.taskId).catch((error) =>
      extra.taskStore.updateTaskStatus(task.taskId, "failed", String(error)).catch(() => {}),
    );
    return { task };
  }

  const handlers = (tool, pollInterval, work) => ({
    createTask: async (args, extra) =>
      start(tool, extra, typeof pollInterval === "function" ? pollInterval(args) : pollInterval, (id) =>
        work(id, args, extra),
      ),
    getTask: async (_args, extra) => extra.taskStore.getTask(extra.taskId),
    getTaskResult: async (_args, extra) => extra.taskStore.getTaskResult(extra.taskId),
  });

  async function finish(extra, taskId, status, result) {
    const task = await extra.taskStore.getTask(taskId);
    if (task && task.status !== "cancelled") {
      await extra.taskStore.storeTaskResult(taskId, status, result);
    }
  }

  server.experimental.tasks.registerToolTask(
    "wait",
    {
      description: "Wait, then answer with the text.",
      inputSchema: { ms: z.number(), text: z.string(), poll: z.number().optional() },
      execution: { taskSupport: "required" },
    },
    handlers("wait", (args) => args.poll ?? 50, async (taskId, args, extra) => {
      await sleep(args.ms);
      await finish(extra, taskId, "completed", text(args.text));
    }),
  );

  server.experimental.tasks.registerToolTask(
    "fail",
    {
      description: "A task that fails.",
      inputSchema: {},
      execution: { taskSupport: "required" },
    },
    handlers("fail", 50, async (taskId, _args, extra) => {
      await sleep(100);
      await finish(extra, taskId, "failed", text("the disk is full", true));
    }),
  );

  server.experimental.tasks.registerToolTask(
    "crash",
    {
      description: "A task whose work throws: it fails with no result stored.",
      inputSchema: {},
      execution: { taskSupport: "required" },
    },
    handlers("crash", 50, async () => {
      await sleep(50);
      throw new Error("the worker crashed");
    }),
  );

  server.experimental.tasks.registerToolTask(
    "ask",
    {
      description: "Ask the user for a colour.",
      inputSchema: {},
      execution: { taskSupport: "required" },
    },
    handlers("ask", 50, async (taskId, _args, extra) => {
      await extra.taskStore.updateTaskStatus(taskId, "input_required", "which colour?");
      const answer = await extra.sendRequest(
        {
          method: "elicitation/create",
          params: {
            message: "Which colour?",
            requestedSchema: {
              type: "object",
              properties: { colour: { type: "string" } },
              required: ["colour"],
            },
          },
        },
        ElicitResultSchema,
        { relatedTask: { taskId } },
      );
      await extra.taskStore.updateTaskStatus(taskId, "working");
      await finish(extra, taskId, "completed", text(`${answer.action}: ${answer.content?.colour}`));
    }),
  );

  server.experimental.tasks.registerToolTask(
    "ask_model",
    {
      description: "Ask the client's model for a word.",
      inputSchema: {},
      execution: { taskSupport: "required" },
    },
    handlers("ask_model", 50, async (taskId, _args, extra) => {
      await extra.taskStore.updateTaskStatus(taskId, "input_required", "asking the model");
      const answer = await extra.sendRequest(
        {
          method: "sampling/createMessage",
          params: {
            messages: [{ role: "user", content: { type: "text", text: "One word?" } }],
            maxTokens: 5,
          },
        },
        CreateMessageResultSchema,
        { relatedTask: { taskId } },
      );
      await extra.taskStore.updateTaskStatus(taskId, "working");
      await finish(extra, taskId, "completed", text(`the model said ${answer.content.text}`));
    }),
  );

  server.experimental.tasks.registerToolTask(
    "count",
    {
      description: "Count to three, reporting progress.",
      inputSchema: {},
      execution: { taskSupport: "required" },
    },
    handlers("count", 50, async (taskId, _args, extra) => {
      const token = extra._meta?.progressToken;
      for (let i = 1; i <= 3; i++) {
        await sleep(30);
        if (token !== undefined) {
          await extra.sendNotification({
            method: "notifications/progress",
            params: { progressToken: token, progress: i, total: 3 },
          });
        }
      }
      await finish(extra, taskId, "completed", text("counted"));
    }),
  );

  server.experimental.tasks.registerToolTask(
    "maybe",
    {
      description: "A tool that may run as a task.",
      inputSchema: {},
      execution: { taskSupport: "optional" },
    },
    handlers("maybe", 50, async (taskId, _args, extra) => {
      await finish(extra, taskId, "completed", text(`as a task: ${extra.taskRequestedTtl !== undefined}`));
    }),
  );

  server.registerTool("task_log", { description: "Every task created, with its status." }, async () => {
    const tasks = [];
    for (const entry of created) {
      const task = await taskStore.getTask(entry.taskId);
      tasks.push({ ...entry, status: task?.status ?? "gone" });
    }
    return text(JSON.stringify(tasks));
  });

  return server;
}

if (process.argv[2] === "http") {
  const sessions = new Map();
  createServer(async (req, res) => {
    const id = req.headers["mcp-session-id"];
    let transport = id === undefined ? undefined : sessions.get(id);
    if (transport === undefined) {
      if (id !== undefined) {
        res.writeHead(404, { "content-type": "application/json" });
        res.end(JSON.stringify({ jsonrpc: "2.0", id: null, error: { code: -32001, message: "Session not found" } }));
        return;
      }
      transport = new StreamableHTTPServerTransport({
        sessionIdGenerator: () => randomUUID(),
        onsessioninitialized: (sid) => sessions.set(sid, transport),
      });
      await makeServer().connect(transport);
    }
    await transport.handleRequest(req, res);
  }).listen(Number(process.argv[3]), "127.0.0.1");
} else {
  await makeServer().connect(new StdioServerTransport());
}
