// typescript-eslint, type-aware: recommended + strict. Rules turned off or down are listed with the reason.
import js from "@eslint/js";
import tseslint from "typescript-eslint";

export default tseslint.config(
  { ignores: ["dist/**", "node_modules/**", ".data/**", "coverage/**"] },
  js.configs.recommended,
  ...tseslint.configs.recommendedTypeChecked,
  ...tseslint.configs.strictTypeChecked,
  {
    languageOptions: {
      parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname },
    },
    rules: {
      // Tokens carry their payload types as phantom `any` defaults (CommandType<any, any>) by design.
      "@typescript-eslint/no-explicit-any": "off",
      "@typescript-eslint/no-unsafe-argument": "off",
      "@typescript-eslint/no-unsafe-assignment": "off",
      "@typescript-eslint/no-unsafe-member-access": "off",
      "@typescript-eslint/no-unsafe-return": "off",
      "@typescript-eslint/no-unsafe-call": "off",
      // noUncheckedIndexedAccess makes `!` after a checked index the honest way to say "present".
      "@typescript-eslint/no-non-null-assertion": "off",
      // Template literals of numbers and unknown values are how messages are written here.
      "@typescript-eslint/restrict-template-expressions": "off",
      // Stores and handlers implement async interfaces without always awaiting.
      "@typescript-eslint/require-await": "off",
      // Defensive checks of values that come from callers at run time (JavaScript users, JSON) are intended.
      "@typescript-eslint/no-unnecessary-condition": "off",
      "@typescript-eslint/unbound-method": "off",
      "@typescript-eslint/no-unused-vars": ["error", { argsIgnorePattern: "^_", varsIgnorePattern: "^_", caughtErrors: "none" }],
      // `(x) => void list.push(x)` and `() => resolve()` are the idiom for callbacks that return nothing.
      "@typescript-eslint/no-confusing-void-expression": ["error", { ignoreArrowShorthand: true, ignoreVoidOperator: true }],
      "@typescript-eslint/no-meaningless-void-operator": "off",
      // Values typed as strings still come from JavaScript callers and JSON: String(x) in messages is defensive on purpose.
      "@typescript-eslint/no-unnecessary-type-conversion": "off",
      // `void | Error` is the contract of a permission function and a command handler's result.
      "@typescript-eslint/no-invalid-void-type": "off",
      // Overloads are kept apart where each reads as its own use in the docs (readmodel lookups, event tokens).
      "@typescript-eslint/unified-signatures": "off",
      // `collection<T>(name)` and the message tokens take a type parameter the caller states on purpose.
      "@typescript-eslint/no-unnecessary-type-parameters": "off",
      // `unknown | X` documents what callers pass in (the X), though the type is unknown.
      "@typescript-eslint/no-redundant-type-constituents": "off",
      // Its fixes broke the typecheck where an assertion sets a contextual type (a callback's parameters, a Map.get after a set).
      "@typescript-eslint/no-unnecessary-type-assertion": "off",
      // `let timer; const close = () => clearTimeout(timer); timer = setTimeout(...)`: read by a closure before its one assignment.
      "prefer-const": ["error", { ignoreReadBeforeAssign: true }],
    },
  },
  {
    // Tests, contract suites and testing examples feed bad values on purpose (non-Error throws, holes, control characters).
    files: ["test/**/*.ts", "src/testing/**/*.ts", "examples/testing/**/*.ts", "bench/**/*.ts"],
    rules: {
      "@typescript-eslint/only-throw-error": "off",
      "@typescript-eslint/prefer-promise-reject-errors": "off",
      "no-sparse-arrays": "off",
      "no-control-regex": "off",
      "@typescript-eslint/no-base-to-string": "off",
      "@typescript-eslint/restrict-plus-operands": "off",
      "@typescript-eslint/no-unsafe-class-instance-assignment": "off",
      "@typescript-eslint/use-unknown-in-catch-callback-variable": "off",
    },
  },
  {
    // NestJS: a module is an empty class carrying its @Module decorator, and Nest declares its option bags as classes.
    files: ["examples/nestjs/**/*.ts"],
    rules: {
      "@typescript-eslint/no-extraneous-class": ["error", { allowWithDecorator: true }],
      "@typescript-eslint/no-unsafe-class-instance-assignment": "off",
    },
  },
  {
    files: ["**/*.js", "**/*.mjs"],
    ...tseslint.configs.disableTypeChecked,
    languageOptions: {
      ...tseslint.configs.disableTypeChecked.languageOptions,
      globals: { process: "readonly", console: "readonly", URL: "readonly" },
    },
  },
  {
    // The web-client example's page: a plain ES module run by the browser.
    files: ["examples/web-client/public/**/*.js"],
    languageOptions: {
      globals: {
        document: "readonly",
        location: "readonly",
        sessionStorage: "readonly",
        fetch: "readonly",
        FormData: "readonly",
        EventSource: "readonly",
        crypto: "readonly",
      },
    },
  },
);
