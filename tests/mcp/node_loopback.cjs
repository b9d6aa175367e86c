// node --require this file: every server the process starts listens on 127.0.0.1 only
// (the MCP reference servers and the conformance suite's test servers bind every interface).
const net = require("net");
const listen = net.Server.prototype.listen;
net.Server.prototype.listen = function (...args) {
  if (typeof args[0] === "object" && args[0] !== null && !args[0].path && !args[0].fd) {
    args[0] = { ...args[0], host: "127.0.0.1" };
  } else if (typeof args[0] === "number" || /^\d+$/.test(String(args[0]))) {
    const port = args[0];
    const rest = args.slice(1);
    if (typeof rest[0] === "string") rest.shift(); // an explicit host is replaced too
    args = [port, "127.0.0.1", ...rest];
  } else if (args.length === 0 || typeof args[0] === "function") {
    args = [0, "127.0.0.1", ...args];
  }
  return listen.apply(this, args);
};
