import type { Api } from "../api.js";
import type { App } from "../app.js";

/** A mounted page: its element and what to undo when the page is left. */
export interface View {
  readonly el: HTMLElement;
  dispose(): void;
}

export interface ViewContext {
  readonly app: App;
  readonly api: Api;
}
