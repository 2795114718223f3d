import { StrictMode } from 'react';
import { createRoot } from 'react-dom/client';
import { MutationCache, QueryCache, QueryClient, QueryClientProvider } from '@tanstack/react-query';
import { ApiError } from './lib/api';
import { AnnouncerProvider } from './components/feedback';
import { endSession } from './features/auth/api';
import { App } from './app/App';
import './styles.css';

/** A 401 not_signed_in anywhere: the session ended on the server (idle, signed out elsewhere), so back to sign-in. */
const onError = (err: unknown) => {
  if (err instanceof ApiError && err.code === 'not_signed_in') endSession(queryClient);
};

const queryClient: QueryClient = new QueryClient({
  queryCache: new QueryCache({ onError }),
  mutationCache: new MutationCache({ onError }),
  defaultOptions: {
    queries: {
      // A refusal or a missing row does not change by asking again; a dropped connection or a 5xx may.
      retry: (count, err) => count < 2 && !(err instanceof ApiError && err.status >= 400 && err.status < 500),
      staleTime: 10_000,
    },
    mutations: { retry: false },
  },
});

const root = document.getElementById('root');
if (!root) throw new Error('index.html has no #root');
createRoot(root).render(
  <StrictMode>
    <QueryClientProvider client={queryClient}>
      <AnnouncerProvider>
        <App />
      </AnnouncerProvider>
    </QueryClientProvider>
  </StrictMode>,
);
