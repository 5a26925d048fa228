/** Sign-in: the built-in Account domain's session (POST /api/sessions), then the identity to act as. */
import { type Api, ApiError } from "../api.js";
import { fill, h } from "../dom.js";
import type { Identity, LoginResult, Session } from "../types.js";
import { errorBanner } from "../ui.js";

export function signInView(api: Api, notice: string, onSignedIn: (s: Session) => void): HTMLElement {
  const message = h("div", { class: "signin-message" }, notice === "" ? null : h("div", { class: "banner info" }, h("span", null, notice)));
  const email = h("input", { type: "email", name: "email", autocomplete: "username", required: true, placeholder: "admin@example.org" });
  const password = h("input", { type: "password", name: "password", autocomplete: "current-password", required: true });
  const submit = h("button", { type: "submit", class: "primary" }, "Sign in");
  const body = h("div", { class: "signin-body" });

  const form = h(
    "form",
    {
      class: "signin-form",
      onsubmit: (ev: Event) => {
        ev.preventDefault();
        void signIn();
      },
    },
    h("label", null, "Email", email),
    h("label", null, "Password", password),
    submit,
  );
  fill(body, form);

  async function signIn(): Promise<void> {
    submit.disabled = true;
    submit.textContent = "Signing in…";
    try {
      const r = await api.request<LoginResult>("POST", "api/sessions", { email: email.value.trim(), password: password.value }, true);
      password.value = "";
      if (r.identities.length === 0)
        throw new ApiError(403, "NO_IDENTITY", "this account is not a member of any tenant, and the Runtime is read through a tenant");
      if (r.identities.length === 1) return void onSignedIn(session(r, r.identities[0]!, email.value.trim()));
      fill(
        body,
        h("p", { class: "hint" }, "Act as which identity?"),
        h(
          "ul",
          { class: "identity-list" },
          r.identities.map((id) =>
            h(
              "li",
              null,
              h(
                "button",
                { type: "button", onclick: () => onSignedIn(session(r, id, email.value.trim())) },
                h("strong", null, id.tenantName),
                h("code", null, id.tenantUuid),
              ),
            ),
          ),
        ),
      );
    } catch (e) {
      fill(message, errorBanner(e, "sign-in failed"));
    } finally {
      submit.disabled = false;
      submit.textContent = "Sign in";
    }
  }

  return h(
    "main",
    { class: "signin", "data-view": "signin" },
    h(
      "div",
      { class: "signin-card" },
      h("div", { class: "brand big" }, h("span", { class: "logo" }), h("span", null, "mneme"), h("small", null, "Runtime")),
      h("p", { class: "hint" }, "Sign in with an account of this application."),
      message,
      body,
    ),
  );
}

function session(r: LoginResult, id: Identity, email: string): Session {
  return {
    token: r.token,
    email,
    accountUuid: r.accountUuid,
    expiresAt: r.expiresAt,
    identityUuid: id.identityUuid,
    tenantUuid: id.tenantUuid,
    tenantName: id.tenantName,
  };
}
