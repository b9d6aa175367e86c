// @ag-ui/client's HttpAgent against toolweave's /api/ag-ui: a run that stops on an approval
// interrupt, then a run resuming it. Usage: node ag_ui_agent.mjs URL approve|deny [TOKEN]
// Prints {first, second, messages, state, events} as JSON.
import { HttpAgent } from "@ag-ui/client";

const [url, mode, token] = process.argv.slice(2);
const headers = token ? { authorization: `Bearer ${token}` } : {};
const agent = new HttpAgent({ url, headers, threadId: "thread-1" });
agent.addMessage({ id: "u1", role: "user", content: "Weather in Paris, then pay Ann 5" });

const events = [];
const subscriber = {
  onEvent: ({ event }) => { events.push(event.type); },
  onRunFinishedEvent: ({ event }) => { events.push(`outcome:${event.outcome?.type ?? "none"}`); },
};
const first = await agent.runAgent({}, subscriber);
const interrupts = agent.pendingInterrupts.map((i) => ({ id: i.id, reason: i.reason, toolCallId: i.toolCallId }));
const resume = agent.pendingInterrupts.map((i) => ({
  interruptId: i.id,
  status: "resolved",
  payload: mode === "approve" ? { approved: true } : { approved: false, reason: "Ann is not a known payee." },
}));
const second = await agent.runAgent({ resume }, subscriber);
console.log(JSON.stringify({
  interrupts,
  firstNew: first.newMessages,
  secondNew: second.newMessages,
  messages: agent.messages,
  state: agent.state,
  pendingAfter: agent.pendingInterrupts,
  events,
}));
