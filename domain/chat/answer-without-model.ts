import { newStemmer } from 'snowball-stemmers';
import { eng as ENGLISH_STOP_WORDS, removeStopwords } from 'stopword';

/** A retrieved passage, best first (the knowledge base's or a long upload's). */
export interface AnswerPassage {
  file_id: string;
  file_name: string;
  /** The document's title recorded at indexing, when it has one (else one is made from the file name). */
  title?: string;
  text: string;
}

export interface AnswerWithoutModel {
  text: string;
  /** The files quoted (the reply's citations). */
  cited: AnswerPassage[];
  /** Related help articles, as questions the visitor can send with one click. */
  suggested_actions: string[];
  /** The visitor asked for a person and the agent may hand off: the conversation becomes a case. */
  handoff: boolean;
  kind: 'greeting' | 'thanks' | 'handoff' | 'answer' | 'not_found';
}

/** Characters of the quoted excerpt, at most (whole sentences). */
const EXCERPT_CHARS = 600;
/** Related articles offered as suggested actions, and the contract's limit on their length. */
const RELATED = 3;
const ACTION_CHARS = 60;
/** Share of the question's content words a passage must contain to count as an answer. */
const MIN_COVERAGE = 0.5;

const stemmer = newStemmer('english');
const words = (text: string) => text.toLowerCase().match(/\p{L}[\p{L}\p{N}'’-]*|\p{N}+/gu) ?? [];
/** The text's content words in order, stop words removed, stemmed as PostgreSQL's English search stems them. */
export const contentStems = (text: string): string[] => removeStopwords(words(text), ENGLISH_STOP_WORDS).map((w) => stemmer.stem(w.replace(/['’]s$/, '')));
const stems = (text: string) => new Set(contentStems(text));

const GREETING = /^(hi|hello|hey|hiya|howdy|hallo|good\s+(morning|afternoon|evening|day))(\s+there)?[\s!.,:)]*$/i;
const THANKS = /^(thanks?|thank\s+you|thx|ty|cheers|many\s+thanks|great,?\s+thanks?|ok(ay)?,?\s+thanks?)(\s+(so\s+much|a\s+lot|again))?[\s!.,:)]*$/i;
const WANTS_PERSON = /\b(human|person|real\s+person|someone|somebody|agent|operator|representative|staff|colleague)\b/i;
const ASKS = /\b(talk|speak|chat|connect|transfer|get|want|need|reach|call)\b/i;

/**
 * The agent's answer when no language model is configured: honest (it only quotes the
 * knowledge base, never invents) and written for the visitor. A greeting or thanks gets a
 * short reply; a request for a person hands the conversation over when the agent may;
 * otherwise the best passage that really covers the question (at least half of its
 * content words, stemmed as PostgreSQL's English search stems them) is quoted in whole
 * sentences under "From our help articles:" with its article's title, overlapping chunks
 * never quoted twice, and up to three other relevant articles are offered as suggested
 * actions. Nothing relevant: it says so, and offers a person when the agent has handoff.
 */
export function answerWithoutModel(question: string, passages: AnswerPassage[], agent: { handoff: boolean; handoffMessage?: string }): AnswerWithoutModel {
  const q = question.trim();
  const none = { cited: [], suggested_actions: [], handoff: false };
  if (GREETING.test(q)) return { ...none, kind: 'greeting', text: 'Hello! Ask me anything about our products and services and I will look it up in our help articles.' };
  if (THANKS.test(q)) return { ...none, kind: 'thanks', text: "You're welcome! Is there anything else I can help you with?" };
  if (agent.handoff && WANTS_PERSON.test(q) && ASKS.test(q)) {
    return { ...none, handoff: true, kind: 'handoff', text: agent.handoffMessage?.trim() || 'I have asked a colleague to take over; they will reply here.' };
  }

  const wanted = stems(q);
  const relevant = passages.filter((p) => coverage(wanted, p.text) >= MIN_COVERAGE);
  if (!relevant.length) {
    const offer = agent.handoff ? ' If you would like to talk to a person, just say so.' : ' You could try asking in other words.';
    return { ...none, kind: 'not_found', text: `I couldn't find that in our help articles.${offer}` };
  }
  const best = relevant[0];
  // The same article's other chunks overlap the best one: they add nothing here.
  const related: string[] = [];
  for (const p of relevant.slice(1)) {
    const title = p.title || titleOf(p.file_name);
    if (p.file_id !== best.file_id && !related.includes(title) && title.length <= ACTION_CHARS) related.push(title);
    if (related.length === RELATED) break;
  }
  return {
    kind: 'answer',
    text: `From our help articles:\n\n**${best.title || titleOf(best.file_name)}**\n\n${excerpt(best.text, wanted)}`,
    cited: [best],
    suggested_actions: related,
    handoff: false,
  };
}

/** The share of the question's content words the passage contains (1 when the question has none). */
function coverage(wanted: Set<string>, text: string): number {
  if (!wanted.size) return 1;
  const have = stems(text);
  let n = 0;
  for (const w of wanted) if (have.has(w)) n++;
  return n / wanted.size;
}

/**
 * Whole sentences of the passage, from the one that covers the question best, up to
 * EXCERPT_CHARS; Markdown headings of the chunk are dropped (the title stands above).
 */
function excerpt(text: string, wanted: Set<string>): string {
  const body = text
    .split('\n')
    .filter((line) => !/^\s{0,3}#{1,6}\s/.test(line))
    .join('\n')
    .trim();
  const sentences = [...new Intl.Segmenter('en', { granularity: 'sentence' }).segment(body)].map((s) => s.segment);
  if (!sentences.length) return body;
  let start = 0;
  let bestScore = -1;
  sentences.forEach((s, i) => {
    const score = coverage(wanted, s);
    if (score > bestScore) {
      bestScore = score;
      start = i;
    }
  });
  // A chunk that starts mid-sentence (the overlap with the one before) is not quoted from its broken first piece.
  if (start === 0 && /^[\p{Ll},;)]/u.test(body) && sentences.length > 1) start = 1;
  let out = '';
  for (let i = start; i < sentences.length; i++) {
    if (out && out.length + sentences[i].length > EXCERPT_CHARS) break;
    out += sentences[i];
  }
  if (out.length > EXCERPT_CHARS) out = `${out.slice(0, out.lastIndexOf(' ', EXCERPT_CHARS))}…`;
  return out.trim();
}

/** An article's title from its file name: "returns-policy_v2.md" → "Returns policy v2". */
export function titleOf(fileName: string): string {
  const base = fileName
    .replace(/\.[a-z0-9]{1,5}$/i, '')
    .replace(/[-_]+/g, ' ')
    .replace(/\s+/g, ' ')
    .trim();
  return base ? base[0].toUpperCase() + base.slice(1) : fileName;
}
