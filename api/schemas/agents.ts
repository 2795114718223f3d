import { z } from 'zod';
import { Cursor } from './common';
import { AgentSpec, EXAMPLE_SPEC } from '../../domain/agents/spec';

const Timestamp = z.string().meta({ format: 'date-time' });

export const Agent = z
  .object({
    id: z.string().meta({ example: 'agt_4b5a6978c0d1e2f3a4b5c6d7' }),
    name: z.string(),
    status: z.enum(['draft', 'published']),
    spec: AgentSpec,
    runnable: z.boolean().meta({ description: 'Published and nothing in invalid_reasons' }),
    invalid_reasons: z.array(z.string()).meta({ description: 'Why the agent cannot run (checked at publish and on every edit after); what sender_agent_invalid reports' }),
    published_at: Timestamp.nullable(),
    created_at: Timestamp,
    updated_at: Timestamp,
  })
  .meta({ id: 'Agent' });

export const AgentList = z.object({ agents: z.array(Agent), next_cursor: z.string().nullable() }).meta({ id: 'AgentList' });
export const ListAgentsQuery = z.object({
  status: z.enum(['draft', 'published']).optional(),
  limit: z.coerce.number().int().min(1).max(200).default(50),
  cursor: Cursor.optional(),
});

/** Create takes a spec document; name is the only required field. */
export const CreateAgentBody = AgentSpec.meta({ description: 'An agent spec; see AgentSpec', example: EXAMPLE_SPEC });
/** From-spec takes the whole document as exported or written by hand. */
export const FromSpecBody = z.object({ spec: AgentSpec }).strict().meta({ example: { spec: EXAMPLE_SPEC } });
/**
 * Patch replaces the top-level spec fields it names; the result is validated as a whole.
 * Each field is validated (and documented) as AgentSpec's, without its default: a field the
 * patch leaves out keeps its stored value instead of being reset.
 */
const { name, instructions, model, knowledge_base, triggers, actions, templates, privacy } = AgentSpec.shape;
export const PatchAgentBody = z
  .object({
    name: name.optional(),
    instructions: instructions.unwrap().optional(),
    model: model.unwrap().optional(),
    knowledge_base: knowledge_base.unwrap().optional(),
    triggers: triggers.unwrap().optional(),
    actions: actions.unwrap().optional(),
    templates: templates.unwrap().optional(),
    privacy,
  })
  .strict()
  .refine((b) => Object.keys(b).length > 0, 'body: at least one spec field')
  .meta({ description: 'Any top-level AgentSpec fields; each replaces the stored one', minProperties: 1 });
export const GenerateAgentBody = z.object({ description: z.string().min(10).max(5000) }).strict();
