// The REST API the CLI uses, with the tab's token, and the live stream of events.

const TOKEN_KEY = "onecluster.token";

export function token() {
  return sessionStorage.getItem(TOKEN_KEY);
}

export function setToken(value) {
  if (value) sessionStorage.setItem(TOKEN_KEY, value);
  else sessionStorage.removeItem(TOKEN_KEY);
}

export class ApiError extends Error {
  constructor(status, body) {
    const error = (body && body.error) || {};
    super(error.message || `HTTP ${status}`);
    this.status = status;
    this.code = error.code || "";
    this.hint = error.hint || "";
  }
}

export async function get(path) {
  const answer = await fetch(path, { headers: { Authorization: `Bearer ${token()}` } });
  const body = await answer.json().catch(() => null);
  if (!answer.ok) throw new ApiError(answer.status, body);
  return body;
}

// Server-sent events over fetch (EventSource cannot send the Authorization header, and a
// token in the URL would end up in logs).  Resumes after the last event id it saw, so the
// feed has no gap across reconnects; reports its state with onState("on"|"retry"|"off").
export class LiveStream {
  constructor({ after, onFeed, onTick, onState }) {
    this.cursor = after;
    this.onFeed = onFeed;
    this.onTick = onTick;
    this.onState = onState;
    this.stopped = false;
    this.controller = null;
  }

  start() {
    this.loop();
  }

  stop() {
    this.stopped = true;
    if (this.controller) this.controller.abort();
    this.onState("off");
  }

  async loop() {
    let delay = 1000;
    while (!this.stopped) {
      try {
        await this.once();
        delay = 1000;
      } catch (err) {
        if (this.stopped) return;
        if (err instanceof ApiError && err.status === 401) {
          this.onState("off");
          return;
        }
      }
      if (this.stopped) return;
      this.onState("retry");
      await new Promise((resolve) => setTimeout(resolve, delay));
      delay = Math.min(delay * 2, 10000);
    }
  }

  async once() {
    this.controller = new AbortController();
    const headers = { Authorization: `Bearer ${token()}`, Accept: "text/event-stream" };
    if (this.cursor !== null && this.cursor !== undefined) headers["Last-Event-ID"] = String(this.cursor);
    const answer = await fetch("/api/v1/live", { headers, signal: this.controller.signal });
    if (!answer.ok) throw new ApiError(answer.status, await answer.json().catch(() => null));
    this.onState("on");
    const reader = answer.body.pipeThrough(new TextDecoderStream()).getReader();
    let buffer = "";
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return;
      buffer += value;
      let end;
      while ((end = buffer.indexOf("\n\n")) >= 0) {
        this.dispatch(buffer.slice(0, end));
        buffer = buffer.slice(end + 2);
      }
    }
  }

  dispatch(block) {
    let kind = "message";
    let id = null;
    const data = [];
    for (const line of block.split("\n")) {
      if (line.startsWith("event: ")) kind = line.slice(7);
      else if (line.startsWith("id: ")) id = Number(line.slice(4));
      else if (line.startsWith("data: ")) data.push(line.slice(6));
    }
    if (!data.length) return;
    const body = JSON.parse(data.join("\n"));
    if (kind === "feed") {
      if (id !== null) this.cursor = id;
      this.onFeed(body);
    } else if (kind === "tick") {
      this.onTick(body);
    }
  }
}
