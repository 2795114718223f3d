/**
 * What the installation's language-model key may be spent on (docs/security.md, "The operator's model key"):
 * an operator allow-list of models and a cap on a turn's output tokens. A tenant's agent
 * names its model and `max_tokens`; on the operator's key only allowed models run, and
 * never above the cap, whatever set the spec (the API refuses such a spec with 400, and a
 * spec stored before, or by any other path, is corrected when the turn runs). An agent
 * that brings its workspace's own LLM credential pays its own provider and chooses freely.
 */

export interface ModelPolicyOptions {
  /** Models besides the default one (LLM_MODEL) that agents may name (LLM_ALLOWED_MODELS). */
  allowed?: string[];
  /** Largest `max_tokens` a turn on the installation's key may ask for (LLM_MAX_TOKENS_CAP). */
  maxTokensCap?: number;
  /** Price per 1,000 tokens of a model, in BILLING_CURRENCY (LLM_MODEL_PRICES); others cost BILLING_PRICE_LLM_1K_TOKENS. */
  prices?: Record<string, number>;
}

export const DEFAULT_MAX_TOKENS_CAP = 4_096;

/** What a turn on the installation's key runs with. */
export interface TurnModel {
  /** The model sent to the provider (undefined: the client's default, LLM_MODEL). */
  name: string | undefined;
  max_tokens: number;
  /** Set when the spec's model was not allowed and the default ran instead. */
  refused?: string;
}

export class ModelPolicy {
  readonly maxTokensCap: number;
  private readonly allowedNames: Set<string>;

  constructor(
    /** The installation's model (LLM_MODEL); null when none is configured. */
    readonly defaultModel: string | null,
    private readonly opts: ModelPolicyOptions = {},
  ) {
    this.maxTokensCap = opts.maxTokensCap ?? DEFAULT_MAX_TOKENS_CAP;
    this.allowedNames = new Set([...(defaultModel ? [defaultModel] : []), ...(opts.allowed ?? [])]);
  }

  /** The models an agent may name on the installation's key. */
  get allowed(): string[] {
    return [...this.allowedNames];
  }

  isAllowed(name: string | undefined): boolean {
    return name === undefined || this.allowedNames.has(name);
  }

  /** Why a spec's model settings cannot run on the installation's key (the field first), or null. */
  refusal(model: { name?: string; max_tokens: number }): { field: 'model.name' | 'model.max_tokens'; message: string } | null {
    if (!this.isAllowed(model.name)) {
      const list = this.allowed.length ? `allowed: ${this.allowed.join(', ')}` : 'none is allowed';
      return { field: 'model.name', message: `'${model.name}' is not a model this installation allows (${list}); or set model.credential_id to the workspace's own llm credential` };
    }
    if (model.max_tokens > this.maxTokensCap) return { field: 'model.max_tokens', message: `at most ${this.maxTokensCap} on this installation's model (LLM_MAX_TOKENS_CAP)` };
    return null;
  }

  /** The spec's model settings as they run on the installation's key: a refused model is replaced by the default, max_tokens capped. */
  forTurn(model: { name?: string; max_tokens: number }): TurnModel {
    const max_tokens = Math.min(model.max_tokens, this.maxTokensCap);
    if (this.isAllowed(model.name)) return { name: model.name, max_tokens };
    return { name: this.defaultModel ?? undefined, max_tokens, refused: model.name };
  }

  /** The usage kind a turn's tokens are metered under: `llm_tokens` on the default model, `llm_tokens:<model>` on another. */
  usageKind(name: string | undefined): string {
    return name === undefined || name === this.defaultModel ? 'llm_tokens' : `llm_tokens:${name}`;
  }

  /** The price per 1,000 tokens of a model, when the operator set one. */
  priceOf(name: string): number | undefined {
    return this.opts.prices?.[name];
  }
}
