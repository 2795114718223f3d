# One image for both production processes; docker-compose.yml picks the command.
FROM node:20-bookworm-slim
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --omit=dev --no-audit --no-fund
COPY . .
ENV NODE_ENV=production HOST=0.0.0.0
EXPOSE 3000
CMD ["node", "--import", "tsx", "api/main.ts"]
