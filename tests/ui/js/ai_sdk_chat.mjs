// The AI SDK's own chat (AbstractChat: the code useChat runs, with its DefaultChatTransport)
// against toolweave's /api/chat. Usage: node ai_sdk_chat.mjs URL approve|deny [TOKEN]
// Prints {messages, errors, status} as JSON.
import {
  AbstractChat,
  DefaultChatTransport,
  lastAssistantMessageIsCompleteWithApprovalResponses,
} from "ai";

const [url, mode, token] = process.argv.slice(2);

class State {
  constructor() {
    this.status = "ready";
    this.error = undefined;
    this.messages = [];
  }
  pushMessage(m) { this.messages = this.messages.concat(m); }
  popMessage() { this.messages = this.messages.slice(0, -1); }
  replaceMessage(i, m) {
    this.messages = [...this.messages.slice(0, i), this.snapshot(m), ...this.messages.slice(i + 1)];
  }
  snapshot(thing) { return structuredClone(thing); }
}

class Chat extends AbstractChat {
  constructor(init) { super({ ...init, state: new State() }); }
}

const errors = [];
const headers = token ? { authorization: `Bearer ${token}` } : {};
const chat = new Chat({
  transport: new DefaultChatTransport({ api: url, headers }),
  sendAutomaticallyWhen: lastAssistantMessageIsCompleteWithApprovalResponses,
  onError: (e) => errors.push(String(e)),
});

const settle = async () => {
  for (let i = 0; i < 500 && chat.status !== "ready" && chat.status !== "error"; i++) {
    await new Promise((r) => setTimeout(r, 10));
  }
};

await chat.sendMessage({ text: "Weather in Paris, then pay Ann 5" });
await settle();
const paused = structuredClone(chat.messages);
const part = chat.messages.at(-1).parts.find((p) => p.type === "tool-send_money");
if (part?.state === "approval-requested") {
  await chat.addToolApprovalResponse({
    id: part.approval.id,
    approved: mode === "approve",
    reason: mode === "approve" ? undefined : "Ann is not a known payee.",
  });
  await new Promise((r) => setTimeout(r, 20));
  await settle();
}
console.log(JSON.stringify({ paused, messages: chat.messages, errors, status: chat.status }));
