# punctual container image (OPS-14): build stage with the dev toolchain, a stage with the
# production dependencies only, and a small runtime stage running as the unprivileged
# `node` user. The same image runs every role: `start` (API + scheduler, the default),
# `worker`, `migrate`, `healthcheck`.
#
#   docker build -t punctual .
#   docker run --rm -p 127.0.0.1:8080:8080 -v punctual-data:/var/lib/punctual punctual
#
# Embedded (no DATABASE_URL) keeps its database in /var/lib/punctual: mount a volume there.
#
# NODE_IMAGE is the base of every stage (default node:20-slim). Pass another only for a
# mirror of the same image, e.g. --build-arg NODE_IMAGE=registry.example.internal/node:20-slim.

ARG NODE_IMAGE=node:20-slim

FROM ${NODE_IMAGE} AS build
WORKDIR /app
COPY package.json package-lock.json ./
# No lifecycle scripts: `prepare` would build before the sources are copied.
RUN npm ci --no-audit --no-fund --ignore-scripts
COPY tsconfig.json tsconfig.build.json ./
COPY scripts/copy-assets.mjs ./scripts/copy-assets.mjs
COPY src ./src
RUN npm run build

FROM ${NODE_IMAGE} AS deps
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --omit=dev --no-audit --no-fund --ignore-scripts && npm cache clean --force

FROM ${NODE_IMAGE} AS runtime
ENV NODE_ENV=production \
    PUNCTUAL_DATA_DIR=/var/lib/punctual
WORKDIR /app
COPY --from=deps /app/node_modules ./node_modules
COPY --from=build /app/dist ./dist
COPY package.json ./
COPY bin ./bin
COPY migrations ./migrations
RUN ln -s /app/bin/punctual.js /usr/local/bin/punctual \
    && mkdir -p /var/lib/punctual \
    && chown node:node /var/lib/punctual \
    && chmod 700 /var/lib/punctual
USER node
VOLUME ["/var/lib/punctual"]
EXPOSE 8080
# Own process only: with DATABASE_URL, this container's scheduler heartbeat in the
# database (--this-host); without, its /readyz on the default port. compose.yml sets a
# check per service.
HEALTHCHECK --interval=15s --timeout=5s --start-period=30s --retries=3 \
    CMD ["punctual", "healthcheck", "--this-host"]
# node is PID 1 and receives SIGTERM itself: in-flight sends finish (OPS-6).
ENTRYPOINT ["punctual"]
CMD ["start", "--host", "0.0.0.0"]
