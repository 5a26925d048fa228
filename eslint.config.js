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
    },
  },
  {
    files: ["**/*.js", "**/*.mjs"],
    ...tseslint.configs.disableTypeChecked,
    languageOptions: { globals: { process: "readonly", console: "readonly", URL: "readonly" } },
  },
);
