import { ConfigError, loadConfig } from '../../app/config';
import { ModelPolicy } from '../../domain/agents/model-policy';

describe('the operator’s model policy (LLM_ALLOWED_MODELS, LLM_MAX_TOKENS_CAP, LLM_MODEL_PRICES)', () => {
  test('a fresh install allows LLM_MODEL only, caps max_tokens at 4096 and has no per-model price', () => {
    const config = loadConfig({});
    expect(config).toMatchObject({ LLM_ALLOWED_MODELS: [], LLM_MAX_TOKENS_CAP: 4_096, LLM_MODEL_PRICES: {} });
    const policy = new ModelPolicy(config.LLM_MODEL, { allowed: config.LLM_ALLOWED_MODELS, maxTokensCap: config.LLM_MAX_TOKENS_CAP });
    expect(policy.refusal({ max_tokens: 800 })).toBeNull();
    expect(policy.refusal({ name: 'gpt-4o-mini', max_tokens: 800 })).toBeNull();
    expect(policy.refusal({ name: 'o1-pro', max_tokens: 800 })).toMatchObject({ field: 'model.name' });
    expect(policy.refusal({ max_tokens: 32_000 })).toMatchObject({ field: 'model.max_tokens' });
  });

  test('names are a comma list (spaces ignored); prices are JSON, so names with a colon work; bad JSON fails at boot naming the setting', () => {
    const config = loadConfig({ LLM_ALLOWED_MODELS: ' gpt-4o , llama3:8b ', LLM_MODEL_PRICES: '{"gpt-4o": 0.01, "llama3:8b": 0}' });
    expect(config.LLM_ALLOWED_MODELS).toEqual(['gpt-4o', 'llama3:8b']);
    expect(config.LLM_MODEL_PRICES).toEqual({ 'gpt-4o': 0.01, 'llama3:8b': 0 });
    expect(() => loadConfig({ LLM_MODEL_PRICES: 'gpt-4o:5' })).toThrow(ConfigError);
    expect(() => loadConfig({ LLM_MODEL_PRICES: 'gpt-4o:5' })).toThrow(/LLM_MODEL_PRICES/);
    expect(() => loadConfig({ LLM_MODEL_PRICES: '{"gpt-4o": -1}' })).toThrow(/LLM_MODEL_PRICES/);
  });

  test('at turn time a refused model runs as the default one and max_tokens is clamped; an allowed one is kept and metered under its own kind', () => {
    const policy = new ModelPolicy('base', { allowed: ['big'], maxTokensCap: 1_000, prices: { big: 0.05 } });
    expect(policy.forTurn({ name: 'o1-pro', max_tokens: 32_000 })).toEqual({ name: 'base', max_tokens: 1_000, refused: 'o1-pro' });
    expect(policy.forTurn({ name: 'big', max_tokens: 500 })).toEqual({ name: 'big', max_tokens: 500 });
    expect(policy.forTurn({ max_tokens: 500 })).toEqual({ name: undefined, max_tokens: 500 });
    expect([policy.usageKind(undefined), policy.usageKind('base'), policy.usageKind('big')]).toEqual(['llm_tokens', 'llm_tokens', 'llm_tokens:big']);
    expect([policy.priceOf('big'), policy.priceOf('base')]).toEqual([0.05, undefined]);
  });
});
