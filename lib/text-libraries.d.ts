// Declarations for the two text libraries the answer without a model uses (neither ships types).

declare module 'snowball-stemmers' {
  export interface Stemmer {
    stem(word: string): string;
  }
  export function newStemmer(language: string): Stemmer;
  export function algorithms(): string[];
}

declare module 'stopword' {
  /** English stop words. */
  export const eng: string[];
  export function removeStopwords(tokens: string[], stopwords?: string[]): string[];
}
