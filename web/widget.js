/*
 * Concierge chat widget. Plain browser JavaScript, no build step, no dependencies. Uses only
 * the public widget API (/api/public/widget/*, header X-Concierge-Site) and the receive-only
 * reply socket /api/chat/connect.
 *
 *   <script src="https://HOST/widget.js" data-site-id="site_..." async></script>
 *
 * Optional attributes: data-greeting (the first message shown; default: the agent's
 * greeting, else a short hello), data-starters (starter questions separated by "|"),
 * data-open (open on the first visit; later visits remember open or closed), data-api-base
 * (default: this script's origin), data-silence-ms (reconnect the socket after this long
 * without any frame; default 75000), data-language (en, es, fr, de, pt or ar; default: the
 * site's setting, else the browser's), data-user-id + data-user-hash (a signed-in visitor:
 * the hex HMAC-SHA256 of "<site_id>.<user id>" keyed with the site secret, made by your
 * server). For single-page apps: ConciergeWidget.boot({user_id, user_hash}) after sign-in and
 * ConciergeWidget.shutdown() at sign-out (the stored conversation is forgotten).
 *
 * The conversation starts (/init) when the visitor first opens the widget or sends a message,
 * not on every page view: until then only the site's public look is read (/config).
 *
 * Model text is never parsed as HTML: replies are rendered from a small Markdown subset by
 * building DOM nodes (text nodes only), links must be https, charts are SVG built from data.
 */
(() => {
  'use strict';
  var script = document.currentScript;
  if (!script || window.ConciergeWidget) return;
  var attr = (n) => script.getAttribute('data-' + n);
  var siteId = attr('site-id');
  var apiBase = (attr('api-base') || new URL(script.src, location.href).origin).replace(/\/+$/, '');
  // The server pings every 30 s; about 75 s of silence means the connection is dead.
  var silenceMs = Number(attr('silence-ms')) || 75000;
  var convKey = 'concierge:conversation:' + siteId;
  var openKey = 'concierge:open:' + siteId;
  var store = {
    get: (k) => { try { return localStorage.getItem(k); } catch (e) { return null; } },
    set: (k, v) => { try { localStorage.setItem(k, v); } catch (e) { /* storage blocked */ } },
    del: (k) => { try { localStorage.removeItem(k); } catch (e) { /* storage blocked */ } },
  };
  /** A signed-in visitor's identity, verified by the server on every call (never sent in a socket URL). */
  var identity = attr('user-id') ? { external_id: attr('user-id'), user_hash: attr('user-hash') || undefined } : null;
  var userContext = () => (identity ? { external_id: identity.external_id, user_hash: identity.user_hash } : undefined);
  var identityQuery = () => (identity ? '&external_id=' + encodeURIComponent(identity.external_id) + (identity.user_hash ? '&user_hash=' + encodeURIComponent(identity.user_hash) : '') : '');

  var handlers = {};
  function emit(event, detail) {
    (handlers[event] || []).slice().forEach((fn) => {
      try { fn(detail); } catch (e) { setTimeout(() => { throw e; }); }
    });
  }

  // ---- Words: English, Spanish, French, German, Portuguese, Arabic. The site's language (appearance.language), else
  // the browser's; a missing word falls back to English. {name} and {n} are filled in.
  var STRINGS = {
    en: {
      open: 'Open chat', openNew: 'Open chat (new message)', minimize: 'Minimize chat', close: 'Close chat', chat: 'Chat', chatWith: 'Chat with {name}',
      messages: 'Messages', earlier: 'Earlier messages', newMsg: '\u2193 New message', message: 'Message', placeholder: 'Write a message\u2026', send: 'Send',
      call: 'Voice call', attach: 'Attach files', remove: 'Remove {name}', you: 'You', team: 'Support team', typing: '{name} is typing\u2026',
      sending: 'Sending\u2026', retry: 'Retry', reconnecting: 'Reconnecting\u2026', sources: 'Sources', attachments: 'Attachments', hello: 'Hi there! How can I help you today?',
      offline: 'You seem to be offline. Check your connection, then retry.', rate_limited: 'You are sending messages very quickly. Wait a moment, then retry.',
      task_in_progress: 'Please wait until the current task has finished, then retry.', conversation_closed: 'This conversation has ended. Start a new one to keep chatting.',
      identity: 'We could not confirm who you are. Reload the page and try again.', unavailable: 'Chat is not available right now. Please try again later.',
      starting: 'The assistant is just starting up. Please try again in a minute.', failedTurn: 'Sorry, something went wrong while answering. Please try again.',
      server: 'Something went wrong on our side. Please try again.', notSent: 'Your message could not be sent. Please retry.',
      noCalls: 'Calls are not available right now. You can keep chatting here.', mic: 'Allow the microphone to talk with the assistant, then try again.',
      cant: 'The call could not connect. Please try again.', cut: 'The call was cut off. Please try again.', onCall: 'On call with {name}', callEnded: 'Call ended',
      connecting: 'Connecting the call\u2026', endCall: 'End call', closeTranscript: 'Close transcript', transcript: 'Call transcript',
      held: 'A teammate will reply here.', wait: 'Usually replies in about {n} min.', away: 'Our team is away right now.', back: 'Back {when}.',
      leave: 'Leave your email and we will answer here.', email: 'Your email', save: 'Save', saved: 'Thanks! We will answer here, and may write to {email}.',
      badEmail: 'Please enter a valid email address.', helpful: 'Helpful', notHelpful: 'Not helpful', thanks: 'Thanks for your feedback!',
      rate: 'How was this conversation?', stars: '{n} of 5 stars', yours: 'Your conversations', newConv: 'New conversation', backToChat: 'Back to the conversation',
      noConvs: 'No earlier conversations.', drop: 'Drop files to attach them', uploading: 'Uploading {name}', uploaded: '{name} is ready',
      unsupported_type: 'This kind of file cannot be sent here.', too_many_files: 'Several files are still being read. Wait a moment, then try again.',
      too_large: '{name} is too large: files can be at most 25 MB.', no_upload: 'Files cannot be sent in this chat.', uploadFailed: '{name} could not be uploaded. Please try again.',
      maxFiles: 'You can attach at most 5 files to a message.', download: 'Download',
    },
    es: {
      open: 'Abrir chat', openNew: 'Abrir chat (mensaje nuevo)', minimize: 'Minimizar chat', close: 'Cerrar chat', chat: 'Chat', chatWith: 'Chat con {name}',
      messages: 'Mensajes', earlier: 'Mensajes anteriores', newMsg: '\u2193 Mensaje nuevo', message: 'Mensaje', placeholder: 'Escribe un mensaje\u2026', send: 'Enviar',
      call: 'Llamada de voz', attach: 'Adjuntar archivos', remove: 'Quitar {name}', you: 'T\u00fa', team: 'Equipo de soporte', typing: '{name} est\u00e1 escribiendo\u2026',
      sending: 'Enviando\u2026', retry: 'Reintentar', reconnecting: 'Reconectando\u2026', sources: 'Fuentes', attachments: 'Adjuntos', hello: '\u00a1Hola! \u00bfEn qu\u00e9 puedo ayudarte hoy?',
      offline: 'Parece que no tienes conexi\u00f3n. Compru\u00e9bala y vuelve a intentarlo.', server: 'Algo ha fallado por nuestra parte. Int\u00e9ntalo de nuevo.',
      notSent: 'No se pudo enviar tu mensaje. Vuelve a intentarlo.', failedTurn: 'Lo sentimos, algo fall\u00f3 al responder. Int\u00e9ntalo de nuevo.',
      held: 'Una persona del equipo te responder\u00e1 aqu\u00ed.', wait: 'Suele responder en unos {n} min.', away: 'Nuestro equipo no est\u00e1 disponible ahora.', back: 'Volvemos {when}.',
      leave: 'Deja tu correo y te responderemos aqu\u00ed.', email: 'Tu correo', save: 'Guardar', saved: '\u00a1Gracias! Te responderemos aqu\u00ed y quiz\u00e1 en {email}.',
      helpful: '\u00datil', notHelpful: 'No fue \u00fatil', thanks: '\u00a1Gracias por tu opini\u00f3n!', rate: '\u00bfQu\u00e9 tal fue esta conversaci\u00f3n?', stars: '{n} de 5 estrellas',
      yours: 'Tus conversaciones', newConv: 'Nueva conversaci\u00f3n', backToChat: 'Volver a la conversaci\u00f3n', drop: 'Suelta los archivos para adjuntarlos', download: 'Descargar',
      rate_limited: 'Est\u00e1s enviando mensajes muy r\u00e1pido. Espera un momento y vuelve a intentarlo.', task_in_progress: 'Espera a que termine la tarea en curso y vuelve a intentarlo.', conversation_closed: 'Esta conversaci\u00f3n ha terminado. Empieza una nueva para seguir.', identity: 'No pudimos confirmar qui\u00e9n eres. Recarga la p\u00e1gina e int\u00e9ntalo de nuevo.', unavailable: 'El chat no est\u00e1 disponible ahora. Int\u00e9ntalo m\u00e1s tarde.', starting: 'El asistente se est\u00e1 iniciando. Int\u00e9ntalo de nuevo en un minuto.', noCalls: 'Las llamadas no est\u00e1n disponibles ahora. Puedes seguir escribiendo aqu\u00ed.', mic: 'Permite el micr\u00f3fono para hablar con el asistente y vuelve a intentarlo.', cant: 'No se pudo conectar la llamada. Int\u00e9ntalo de nuevo.', cut: 'La llamada se cort\u00f3. Int\u00e9ntalo de nuevo.', onCall: 'En llamada con {name}', callEnded: 'Llamada finalizada', connecting: 'Conectando la llamada\u2026', endCall: 'Colgar', closeTranscript: 'Cerrar transcripci\u00f3n', transcript: 'Transcripci\u00f3n de la llamada', badEmail: 'Escribe una direcci\u00f3n de correo v\u00e1lida.', noConvs: 'No hay conversaciones anteriores.', uploading: 'Subiendo {name}', uploaded: '{name} est\u00e1 listo', unsupported_type: 'Este tipo de archivo no se puede enviar aqu\u00ed.', too_many_files: 'Todav\u00eda se est\u00e1n leyendo varios archivos. Espera un momento y vuelve a intentarlo.', too_large: '{name} es demasiado grande: los archivos pueden tener 25 MB como m\u00e1ximo.', no_upload: 'En este chat no se pueden enviar archivos.', uploadFailed: 'No se pudo subir {name}. Int\u00e9ntalo de nuevo.', maxFiles: 'Puedes adjuntar como m\u00e1ximo 5 archivos a un mensaje.',
    },
    fr: {
      open: 'Ouvrir le chat', openNew: 'Ouvrir le chat (nouveau message)', minimize: 'R\u00e9duire le chat', close: 'Fermer le chat', chat: 'Chat', chatWith: 'Discuter avec {name}',
      messages: 'Messages', earlier: 'Messages pr\u00e9c\u00e9dents', newMsg: '\u2193 Nouveau message', message: 'Message', placeholder: '\u00c9crivez un message\u2026', send: 'Envoyer',
      call: 'Appel vocal', attach: 'Joindre des fichiers', remove: 'Retirer {name}', you: 'Vous', team: '\u00c9quipe support', typing: '{name} \u00e9crit\u2026',
      sending: 'Envoi\u2026', retry: 'R\u00e9essayer', reconnecting: 'Reconnexion\u2026', sources: 'Sources', attachments: 'Pi\u00e8ces jointes', hello: 'Bonjour ! Comment puis-je vous aider ?',
      offline: 'Vous semblez hors ligne. V\u00e9rifiez votre connexion, puis r\u00e9essayez.', server: 'Un probl\u00e8me est survenu de notre c\u00f4t\u00e9. Veuillez r\u00e9essayer.',
      notSent: "Votre message n'a pas pu \u00eatre envoy\u00e9. Veuillez r\u00e9essayer.", failedTurn: 'D\u00e9sol\u00e9, une erreur est survenue pendant la r\u00e9ponse. Veuillez r\u00e9essayer.',
      held: "Quelqu'un de l'\u00e9quipe vous r\u00e9pondra ici.", wait: 'R\u00e9pond en g\u00e9n\u00e9ral en {n} min environ.', away: "Notre \u00e9quipe n'est pas disponible pour le moment.", back: 'De retour {when}.',
      leave: 'Laissez votre e-mail et nous vous r\u00e9pondrons ici.', email: 'Votre e-mail', save: 'Enregistrer', saved: 'Merci ! Nous vous r\u00e9pondrons ici, et peut-\u00eatre \u00e0 {email}.',
      helpful: 'Utile', notHelpful: 'Pas utile', thanks: 'Merci pour votre avis !', rate: "Comment s'est pass\u00e9e cette conversation ?", stars: '{n} sur 5 \u00e9toiles',
      yours: 'Vos conversations', newConv: 'Nouvelle conversation', backToChat: 'Retour \u00e0 la conversation', drop: 'D\u00e9posez les fichiers pour les joindre', download: 'T\u00e9l\u00e9charger',
      rate_limited: 'Vous envoyez des messages tr\u00e8s vite. Patientez un instant, puis r\u00e9essayez.', task_in_progress: 'Attendez la fin de la t\u00e2che en cours, puis r\u00e9essayez.', conversation_closed: 'Cette conversation est termin\u00e9e. Commencez-en une nouvelle pour continuer.', identity: 'Nous n\'avons pas pu confirmer votre identit\u00e9. Rechargez la page et r\u00e9essayez.', unavailable: 'Le chat n\'est pas disponible pour le moment. R\u00e9essayez plus tard.', starting: 'L\'assistant d\u00e9marre. R\u00e9essayez dans une minute.', noCalls: 'Les appels ne sont pas disponibles pour le moment. Vous pouvez continuer \u00e0 \u00e9crire ici.', mic: 'Autorisez le micro pour parler avec l\'assistant, puis r\u00e9essayez.', cant: 'L\'appel n\'a pas pu \u00eatre \u00e9tabli. Veuillez r\u00e9essayer.', cut: 'L\'appel a \u00e9t\u00e9 coup\u00e9. Veuillez r\u00e9essayer.', onCall: 'En appel avec {name}', callEnded: 'Appel termin\u00e9', connecting: 'Connexion de l\'appel\u2026', endCall: 'Raccrocher', closeTranscript: 'Fermer la transcription', transcript: 'Transcription de l\'appel', badEmail: 'Saisissez une adresse e-mail valide.', noConvs: 'Aucune conversation pr\u00e9c\u00e9dente.', uploading: 'Envoi de {name}', uploaded: '{name} est pr\u00eat', unsupported_type: 'Ce type de fichier ne peut pas \u00eatre envoy\u00e9 ici.', too_many_files: 'Plusieurs fichiers sont encore en cours de lecture. Patientez un instant, puis r\u00e9essayez.', too_large: '{name} est trop volumineux : 25 Mo au maximum par fichier.', no_upload: 'Les fichiers ne peuvent pas \u00eatre envoy\u00e9s dans ce chat.', uploadFailed: '{name} n\'a pas pu \u00eatre envoy\u00e9. Veuillez r\u00e9essayer.', maxFiles: 'Vous pouvez joindre au plus 5 fichiers \u00e0 un message.',
    },
    de: {
      open: 'Chat \u00f6ffnen', openNew: 'Chat \u00f6ffnen (neue Nachricht)', minimize: 'Chat minimieren', close: 'Chat schlie\u00dfen', chat: 'Chat', chatWith: 'Chat mit {name}',
      messages: 'Nachrichten', earlier: 'Fr\u00fchere Nachrichten', newMsg: '\u2193 Neue Nachricht', message: 'Nachricht', placeholder: 'Nachricht schreiben\u2026', send: 'Senden',
      call: 'Sprachanruf', attach: 'Dateien anh\u00e4ngen', remove: '{name} entfernen', you: 'Sie', team: 'Support-Team', typing: '{name} schreibt\u2026',
      sending: 'Wird gesendet\u2026', retry: 'Erneut versuchen', reconnecting: 'Verbindung wird wiederhergestellt\u2026', sources: 'Quellen', attachments: 'Anh\u00e4nge', hello: 'Hallo! Wie kann ich Ihnen helfen?',
      offline: 'Sie scheinen offline zu sein. Pr\u00fcfen Sie die Verbindung und versuchen Sie es erneut.', server: 'Bei uns ist etwas schiefgelaufen. Bitte versuchen Sie es erneut.',
      notSent: 'Ihre Nachricht konnte nicht gesendet werden. Bitte erneut versuchen.', failedTurn: 'Beim Antworten ist leider ein Fehler aufgetreten. Bitte erneut versuchen.',
      held: 'Jemand aus dem Team antwortet Ihnen hier.', wait: 'Antwortet meist in etwa {n} Min.', away: 'Unser Team ist gerade nicht erreichbar.', back: 'Wieder da {when}.',
      leave: 'Hinterlassen Sie Ihre E-Mail, wir antworten hier.', email: 'Ihre E-Mail', save: 'Speichern', saved: 'Danke! Wir antworten hier und eventuell an {email}.',
      helpful: 'Hilfreich', notHelpful: 'Nicht hilfreich', thanks: 'Danke f\u00fcr Ihr Feedback!', rate: 'Wie war dieses Gespr\u00e4ch?', stars: '{n} von 5 Sternen',
      yours: 'Ihre Gespr\u00e4che', newConv: 'Neues Gespr\u00e4ch', backToChat: 'Zur\u00fcck zum Gespr\u00e4ch', drop: 'Dateien hier ablegen, um sie anzuh\u00e4ngen', download: 'Herunterladen',
      rate_limited: 'Sie senden sehr schnell Nachrichten. Warten Sie kurz und versuchen Sie es erneut.', task_in_progress: 'Bitte warten Sie, bis die laufende Aufgabe beendet ist, und versuchen Sie es erneut.', conversation_closed: 'Dieses Gespr\u00e4ch ist beendet. Beginnen Sie ein neues, um weiterzuschreiben.', identity: 'Wir konnten Ihre Identit\u00e4t nicht best\u00e4tigen. Laden Sie die Seite neu und versuchen Sie es erneut.', unavailable: 'Der Chat ist gerade nicht verf\u00fcgbar. Bitte versuchen Sie es sp\u00e4ter erneut.', starting: 'Der Assistent startet gerade. Bitte versuchen Sie es in einer Minute erneut.', noCalls: 'Anrufe sind gerade nicht m\u00f6glich. Sie k\u00f6nnen hier weiterschreiben.', mic: 'Erlauben Sie das Mikrofon, um mit dem Assistenten zu sprechen, und versuchen Sie es erneut.', cant: 'Der Anruf konnte nicht verbunden werden. Bitte erneut versuchen.', cut: 'Der Anruf wurde unterbrochen. Bitte erneut versuchen.', onCall: 'Im Gespr\u00e4ch mit {name}', callEnded: 'Anruf beendet', connecting: 'Anruf wird verbunden\u2026', endCall: 'Auflegen', closeTranscript: 'Mitschrift schlie\u00dfen', transcript: 'Mitschrift des Anrufs', badEmail: 'Bitte geben Sie eine g\u00fcltige E-Mail-Adresse ein.', noConvs: 'Keine fr\u00fcheren Gespr\u00e4che.', uploading: '{name} wird hochgeladen', uploaded: '{name} ist bereit', unsupported_type: 'Diese Art von Datei kann hier nicht gesendet werden.', too_many_files: 'Mehrere Dateien werden noch gelesen. Warten Sie kurz und versuchen Sie es erneut.', too_large: '{name} ist zu gro\u00df: Dateien d\u00fcrfen h\u00f6chstens 25 MB haben.', no_upload: 'In diesem Chat k\u00f6nnen keine Dateien gesendet werden.', uploadFailed: '{name} konnte nicht hochgeladen werden. Bitte erneut versuchen.', maxFiles: 'Sie k\u00f6nnen einer Nachricht h\u00f6chstens 5 Dateien anh\u00e4ngen.',
    },
    pt: {
      open: 'Abrir chat', openNew: 'Abrir chat (nova mensagem)', minimize: 'Minimizar chat', close: 'Fechar chat', chat: 'Chat', chatWith: 'Conversar com {name}',
      messages: 'Mensagens', earlier: 'Mensagens anteriores', newMsg: '\u2193 Nova mensagem', message: 'Mensagem', placeholder: 'Escreva uma mensagem\u2026', send: 'Enviar',
      call: 'Chamada de voz', attach: 'Anexar arquivos', remove: 'Remover {name}', you: 'Voc\u00ea', team: 'Equipe de suporte', typing: '{name} est\u00e1 digitando\u2026',
      sending: 'Enviando\u2026', retry: 'Tentar novamente', reconnecting: 'Reconectando\u2026', sources: 'Fontes', attachments: 'Anexos', hello: 'Ol\u00e1! Como posso ajudar hoje?',
      offline: 'Parece que voc\u00ea est\u00e1 sem conex\u00e3o. Verifique e tente novamente.', server: 'Algo deu errado do nosso lado. Tente novamente.',
      notSent: 'N\u00e3o foi poss\u00edvel enviar sua mensagem. Tente novamente.', failedTurn: 'Desculpe, algo deu errado ao responder. Tente novamente.',
      held: 'Uma pessoa da equipe vai responder aqui.', wait: 'Costuma responder em cerca de {n} min.', away: 'Nossa equipe n\u00e3o est\u00e1 dispon\u00edvel agora.', back: 'Voltamos {when}.',
      leave: 'Deixe seu e-mail e responderemos aqui.', email: 'Seu e-mail', save: 'Salvar', saved: 'Obrigado! Responderemos aqui e talvez em {email}.',
      helpful: '\u00datil', notHelpful: 'N\u00e3o foi \u00fatil', thanks: 'Obrigado pela sua opini\u00e3o!', rate: 'Como foi esta conversa?', stars: '{n} de 5 estrelas',
      yours: 'Suas conversas', newConv: 'Nova conversa', backToChat: 'Voltar \u00e0 conversa', drop: 'Solte os arquivos para anex\u00e1-los', download: 'Baixar',
      rate_limited: 'Voc\u00ea est\u00e1 enviando mensagens muito r\u00e1pido. Aguarde um momento e tente novamente.', task_in_progress: 'Aguarde a tarefa em andamento terminar e tente novamente.', conversation_closed: 'Esta conversa terminou. Comece uma nova para continuar.', identity: 'N\u00e3o conseguimos confirmar quem voc\u00ea \u00e9. Recarregue a p\u00e1gina e tente novamente.', unavailable: 'O chat n\u00e3o est\u00e1 dispon\u00edvel agora. Tente novamente mais tarde.', starting: 'O assistente est\u00e1 iniciando. Tente novamente em um minuto.', noCalls: 'As chamadas n\u00e3o est\u00e3o dispon\u00edveis agora. Voc\u00ea pode continuar escrevendo aqui.', mic: 'Permita o microfone para falar com o assistente e tente novamente.', cant: 'N\u00e3o foi poss\u00edvel conectar a chamada. Tente novamente.', cut: 'A chamada caiu. Tente novamente.', onCall: 'Em chamada com {name}', callEnded: 'Chamada encerrada', connecting: 'Conectando a chamada\u2026', endCall: 'Encerrar chamada', closeTranscript: 'Fechar transcri\u00e7\u00e3o', transcript: 'Transcri\u00e7\u00e3o da chamada', badEmail: 'Digite um endere\u00e7o de e-mail v\u00e1lido.', noConvs: 'Nenhuma conversa anterior.', uploading: 'Enviando {name}', uploaded: '{name} est\u00e1 pronto', unsupported_type: 'Este tipo de arquivo n\u00e3o pode ser enviado aqui.', too_many_files: 'V\u00e1rios arquivos ainda est\u00e3o sendo lidos. Aguarde um momento e tente novamente.', too_large: '{name} \u00e9 grande demais: os arquivos podem ter no m\u00e1ximo 25 MB.', no_upload: 'N\u00e3o \u00e9 poss\u00edvel enviar arquivos neste chat.', uploadFailed: 'N\u00e3o foi poss\u00edvel enviar {name}. Tente novamente.', maxFiles: 'Voc\u00ea pode anexar no m\u00e1ximo 5 arquivos a uma mensagem.',
    },
    ar: {
      open: '\u0641\u062a\u062d \u0627\u0644\u062f\u0631\u062f\u0634\u0629', openNew: '\u0641\u062a\u062d \u0627\u0644\u062f\u0631\u062f\u0634\u0629 (\u0631\u0633\u0627\u0644\u0629 \u062c\u062f\u064a\u062f\u0629)', minimize: '\u062a\u0635\u063a\u064a\u0631 \u0627\u0644\u062f\u0631\u062f\u0634\u0629', close: '\u0625\u063a\u0644\u0627\u0642 \u0627\u0644\u062f\u0631\u062f\u0634\u0629', chat: '\u062f\u0631\u062f\u0634\u0629', chatWith: '\u062f\u0631\u062f\u0634\u0629 \u0645\u0639 {name}',
      messages: '\u0627\u0644\u0631\u0633\u0627\u0626\u0644', earlier: '\u0631\u0633\u0627\u0626\u0644 \u0633\u0627\u0628\u0642\u0629', newMsg: '\u2193 \u0631\u0633\u0627\u0644\u0629 \u062c\u062f\u064a\u062f\u0629', message: '\u0627\u0644\u0631\u0633\u0627\u0644\u0629', placeholder: '\u0627\u0643\u062a\u0628 \u0631\u0633\u0627\u0644\u0629\u2026', send: '\u0625\u0631\u0633\u0627\u0644',
      call: '\u0645\u0643\u0627\u0644\u0645\u0629 \u0635\u0648\u062a\u064a\u0629', attach: '\u0625\u0631\u0641\u0627\u0642 \u0645\u0644\u0641\u0627\u062a', remove: '\u0625\u0632\u0627\u0644\u0629 {name}', you: '\u0623\u0646\u062a', team: '\u0641\u0631\u064a\u0642 \u0627\u0644\u062f\u0639\u0645', typing: '{name} \u064a\u0643\u062a\u0628\u2026',
      sending: '\u062c\u0627\u0631\u064d \u0627\u0644\u0625\u0631\u0633\u0627\u0644\u2026', retry: '\u0625\u0639\u0627\u062f\u0629 \u0627\u0644\u0645\u062d\u0627\u0648\u0644\u0629', reconnecting: '\u062c\u0627\u0631\u064d \u0625\u0639\u0627\u062f\u0629 \u0627\u0644\u0627\u062a\u0635\u0627\u0644\u2026', sources: '\u0627\u0644\u0645\u0635\u0627\u062f\u0631', attachments: '\u0627\u0644\u0645\u0631\u0641\u0642\u0627\u062a', hello: '\u0645\u0631\u062d\u0628\u064b\u0627! \u0643\u064a\u0641 \u064a\u0645\u0643\u0646\u0646\u064a \u0645\u0633\u0627\u0639\u062f\u062a\u0643 \u0627\u0644\u064a\u0648\u0645\u061f',
      offline: '\u064a\u0628\u062f\u0648 \u0623\u0646\u0643 \u063a\u064a\u0631 \u0645\u062a\u0635\u0644. \u062a\u062d\u0642\u0642 \u0645\u0646 \u0627\u0644\u0627\u062a\u0635\u0627\u0644 \u062b\u0645 \u0623\u0639\u062f \u0627\u0644\u0645\u062d\u0627\u0648\u0644\u0629.', server: '\u062d\u062f\u062b \u062e\u0637\u0623 \u0644\u062f\u064a\u0646\u0627. \u064a\u0631\u062c\u0649 \u0627\u0644\u0645\u062d\u0627\u0648\u0644\u0629 \u0645\u0631\u0629 \u0623\u062e\u0631\u0649.',
      notSent: '\u062a\u0639\u0630\u0631 \u0625\u0631\u0633\u0627\u0644 \u0631\u0633\u0627\u0644\u062a\u0643. \u064a\u0631\u062c\u0649 \u0625\u0639\u0627\u062f\u0629 \u0627\u0644\u0645\u062d\u0627\u0648\u0644\u0629.', failedTurn: '\u0639\u0630\u0631\u064b\u0627\u060c \u062d\u062f\u062b \u062e\u0637\u0623 \u0623\u062b\u0646\u0627\u0621 \u0627\u0644\u0631\u062f. \u064a\u0631\u062c\u0649 \u0627\u0644\u0645\u062d\u0627\u0648\u0644\u0629 \u0645\u0631\u0629 \u0623\u062e\u0631\u0649.',
      held: '\u0633\u064a\u0631\u062f \u0639\u0644\u064a\u0643 \u0623\u062d\u062f \u0623\u0639\u0636\u0627\u0621 \u0627\u0644\u0641\u0631\u064a\u0642 \u0647\u0646\u0627.', wait: '\u064a\u0631\u062f \u0639\u0627\u062f\u0629\u064b \u062e\u0644\u0627\u0644 {n} \u062f\u0642\u064a\u0642\u0629 \u062a\u0642\u0631\u064a\u0628\u064b\u0627.', away: '\u0641\u0631\u064a\u0642\u0646\u0627 \u063a\u064a\u0631 \u0645\u062a\u0627\u062d \u0627\u0644\u0622\u0646.', back: '\u0646\u0639\u0648\u062f {when}.',
      leave: '\u0627\u062a\u0631\u0643 \u0628\u0631\u064a\u062f\u0643 \u0627\u0644\u0625\u0644\u0643\u062a\u0631\u0648\u0646\u064a \u0648\u0633\u0646\u0631\u062f \u0647\u0646\u0627.', email: '\u0628\u0631\u064a\u062f\u0643 \u0627\u0644\u0625\u0644\u0643\u062a\u0631\u0648\u0646\u064a', save: '\u062d\u0641\u0638', saved: '\u0634\u0643\u0631\u064b\u0627! \u0633\u0646\u0631\u062f \u0647\u0646\u0627 \u0648\u0631\u0628\u0645\u0627 \u0639\u0644\u0649 {email}.',
      helpful: '\u0645\u0641\u064a\u062f', notHelpful: '\u063a\u064a\u0631 \u0645\u0641\u064a\u062f', thanks: '\u0634\u0643\u0631\u064b\u0627 \u0639\u0644\u0649 \u0631\u0623\u064a\u0643!', rate: '\u0643\u064a\u0641 \u0643\u0627\u0646\u062a \u0647\u0630\u0647 \u0627\u0644\u0645\u062d\u0627\u062f\u062b\u0629\u061f', stars: '{n} \u0645\u0646 5 \u0646\u062c\u0648\u0645',
      yours: '\u0645\u062d\u0627\u062f\u062b\u0627\u062a\u0643', newConv: '\u0645\u062d\u0627\u062f\u062b\u0629 \u062c\u062f\u064a\u062f\u0629', backToChat: '\u0627\u0644\u0639\u0648\u062f\u0629 \u0625\u0644\u0649 \u0627\u0644\u0645\u062d\u0627\u062f\u062b\u0629', drop: '\u0623\u0641\u0644\u062a \u0627\u0644\u0645\u0644\u0641\u0627\u062a \u0644\u0625\u0631\u0641\u0627\u0642\u0647\u0627', download: '\u062a\u0646\u0632\u064a\u0644',
      rate_limited: '\u0623\u0646\u062a \u062a\u0631\u0633\u0644 \u0627\u0644\u0631\u0633\u0627\u0626\u0644 \u0628\u0633\u0631\u0639\u0629 \u0643\u0628\u064a\u0631\u0629. \u0627\u0646\u062a\u0638\u0631 \u0642\u0644\u064a\u0644\u064b\u0627 \u062b\u0645 \u0623\u0639\u062f \u0627\u0644\u0645\u062d\u0627\u0648\u0644\u0629.', task_in_progress: '\u064a\u0631\u062c\u0649 \u0627\u0644\u0627\u0646\u062a\u0638\u0627\u0631 \u062d\u062a\u0649 \u062a\u0646\u062a\u0647\u064a \u0627\u0644\u0645\u0647\u0645\u0629 \u0627\u0644\u062c\u0627\u0631\u064a\u0629 \u062b\u0645 \u0625\u0639\u0627\u062f\u0629 \u0627\u0644\u0645\u062d\u0627\u0648\u0644\u0629.', conversation_closed: '\u0627\u0646\u062a\u0647\u062a \u0647\u0630\u0647 \u0627\u0644\u0645\u062d\u0627\u062f\u062b\u0629. \u0627\u0628\u062f\u0623 \u0645\u062d\u0627\u062f\u062b\u0629 \u062c\u062f\u064a\u062f\u0629 \u0644\u0645\u062a\u0627\u0628\u0639\u0629 \u0627\u0644\u062f\u0631\u062f\u0634\u0629.', identity: '\u062a\u0639\u0630\u0631 \u0627\u0644\u062a\u062d\u0642\u0642 \u0645\u0646 \u0647\u0648\u064a\u062a\u0643. \u0623\u0639\u062f \u062a\u062d\u0645\u064a\u0644 \u0627\u0644\u0635\u0641\u062d\u0629 \u0648\u062d\u0627\u0648\u0644 \u0645\u0631\u0629 \u0623\u062e\u0631\u0649.', unavailable: '\u0627\u0644\u062f\u0631\u062f\u0634\u0629 \u063a\u064a\u0631 \u0645\u062a\u0627\u062d\u0629 \u0627\u0644\u0622\u0646. \u064a\u0631\u062c\u0649 \u0627\u0644\u0645\u062d\u0627\u0648\u0644\u0629 \u0644\u0627\u062d\u0642\u064b\u0627.', starting: '\u0627\u0644\u0645\u0633\u0627\u0639\u062f \u0642\u064a\u062f \u0627\u0644\u062a\u0634\u063a\u064a\u0644. \u064a\u0631\u062c\u0649 \u0627\u0644\u0645\u062d\u0627\u0648\u0644\u0629 \u0645\u0631\u0629 \u0623\u062e\u0631\u0649 \u0628\u0639\u062f \u062f\u0642\u064a\u0642\u0629.', noCalls: '\u0627\u0644\u0645\u0643\u0627\u0644\u0645\u0627\u062a \u063a\u064a\u0631 \u0645\u062a\u0627\u062d\u0629 \u0627\u0644\u0622\u0646. \u064a\u0645\u0643\u0646\u0643 \u0645\u062a\u0627\u0628\u0639\u0629 \u0627\u0644\u062f\u0631\u062f\u0634\u0629 \u0647\u0646\u0627.', mic: '\u0627\u0633\u0645\u062d \u0628\u0627\u0633\u062a\u062e\u062f\u0627\u0645 \u0627\u0644\u0645\u064a\u0643\u0631\u0648\u0641\u0648\u0646 \u0644\u0644\u062a\u062d\u062f\u062b \u0645\u0639 \u0627\u0644\u0645\u0633\u0627\u0639\u062f\u060c \u062b\u0645 \u0623\u0639\u062f \u0627\u0644\u0645\u062d\u0627\u0648\u0644\u0629.', cant: '\u062a\u0639\u0630\u0631 \u0625\u062c\u0631\u0627\u0621 \u0627\u0644\u0645\u0643\u0627\u0644\u0645\u0629. \u064a\u0631\u062c\u0649 \u0627\u0644\u0645\u062d\u0627\u0648\u0644\u0629 \u0645\u0631\u0629 \u0623\u062e\u0631\u0649.', cut: '\u0627\u0646\u0642\u0637\u0639\u062a \u0627\u0644\u0645\u0643\u0627\u0644\u0645\u0629. \u064a\u0631\u062c\u0649 \u0627\u0644\u0645\u062d\u0627\u0648\u0644\u0629 \u0645\u0631\u0629 \u0623\u062e\u0631\u0649.', onCall: '\u0641\u064a \u0645\u0643\u0627\u0644\u0645\u0629 \u0645\u0639 {name}', callEnded: '\u0627\u0646\u062a\u0647\u062a \u0627\u0644\u0645\u0643\u0627\u0644\u0645\u0629', connecting: '\u062c\u0627\u0631\u064d \u0627\u0644\u0627\u062a\u0635\u0627\u0644\u2026', endCall: '\u0625\u0646\u0647\u0627\u0621 \u0627\u0644\u0645\u0643\u0627\u0644\u0645\u0629', closeTranscript: '\u0625\u063a\u0644\u0627\u0642 \u0627\u0644\u0646\u0635', transcript: '\u0646\u0635 \u0627\u0644\u0645\u0643\u0627\u0644\u0645\u0629', badEmail: '\u064a\u0631\u062c\u0649 \u0625\u062f\u062e\u0627\u0644 \u0628\u0631\u064a\u062f \u0625\u0644\u0643\u062a\u0631\u0648\u0646\u064a \u0635\u062d\u064a\u062d.', noConvs: '\u0644\u0627 \u062a\u0648\u062c\u062f \u0645\u062d\u0627\u062f\u062b\u0627\u062a \u0633\u0627\u0628\u0642\u0629.', uploading: '\u062c\u0627\u0631\u064d \u0631\u0641\u0639 {name}', uploaded: '{name} \u062c\u0627\u0647\u0632', unsupported_type: '\u0644\u0627 \u064a\u0645\u0643\u0646 \u0625\u0631\u0633\u0627\u0644 \u0647\u0630\u0627 \u0627\u0644\u0646\u0648\u0639 \u0645\u0646 \u0627\u0644\u0645\u0644\u0641\u0627\u062a \u0647\u0646\u0627.', too_many_files: '\u0644\u0627 \u062a\u0632\u0627\u0644 \u0639\u062f\u0629 \u0645\u0644\u0641\u0627\u062a \u0642\u064a\u062f \u0627\u0644\u0642\u0631\u0627\u0621\u0629. \u0627\u0646\u062a\u0638\u0631 \u0642\u0644\u064a\u0644\u064b\u0627 \u062b\u0645 \u0623\u0639\u062f \u0627\u0644\u0645\u062d\u0627\u0648\u0644\u0629.', too_large: '{name} \u0643\u0628\u064a\u0631 \u062c\u062f\u064b\u0627: \u0627\u0644\u062d\u062f \u0627\u0644\u0623\u0642\u0635\u0649 \u0644\u062d\u062c\u0645 \u0627\u0644\u0645\u0644\u0641 25 \u0645\u064a\u063a\u0627\u0628\u0627\u064a\u062a.', no_upload: '\u0644\u0627 \u064a\u0645\u0643\u0646 \u0625\u0631\u0633\u0627\u0644 \u0627\u0644\u0645\u0644\u0641\u0627\u062a \u0641\u064a \u0647\u0630\u0647 \u0627\u0644\u062f\u0631\u062f\u0634\u0629.', uploadFailed: '\u062a\u0639\u0630\u0631 \u0631\u0641\u0639 {name}. \u064a\u0631\u062c\u0649 \u0627\u0644\u0645\u062d\u0627\u0648\u0644\u0629 \u0645\u0631\u0629 \u0623\u062e\u0631\u0649.', maxFiles: '\u064a\u0645\u0643\u0646\u0643 \u0625\u0631\u0641\u0627\u0642 5 \u0645\u0644\u0641\u0627\u062a \u0643\u062d\u062f \u0623\u0642\u0635\u0649 \u0628\u0631\u0633\u0627\u0644\u0629 \u0648\u0627\u062d\u062f\u0629.',
    },
  };
  var lang = 'en';
  function pickLanguage(wanted) {
    var tries = [attr('language'), wanted].concat(navigator.languages || [navigator.language]);
    for (var i = 0; i < tries.length; i++) {
      var l = String(tries[i] || '').toLowerCase().split('-')[0];
      if (l && l !== 'auto' && STRINGS[l]) return l;
    }
    return 'en';
  }
  /** A UI word in the widget's language, with {name}-style blanks filled. */
  function t(key, vars) {
    var s = (STRINGS[lang] && STRINGS[lang][key]) || STRINGS.en[key] || key;
    return s.replace(/\{(\w+)\}/g, (m, k) => (vars && vars[k] != null ? String(vars[k]) : m));
  }

  var config = null; // the site's public look and agent (/config, or /init)
  var session = null; // init response
  var starting = null; // the /init in flight
  var agentName = 'Assistant';
  var sock = null;
  var sockOpen = null; // resolves when the current socket is open (or has failed)
  var silenceTimer = 0;
  var retryTimer = 0;
  var retryDelay = 1000;
  var nextBefore = null;
  var failed = {}; // reply ids that ended in an error frame
  var pending = {}; // reply id -> the visitor's row it answers
  var unanswered = {}; // reply ids a person will answer (the conversation is held): no typing dots for them
  var following = null; // the reply row the log follows while it grows
  var lastTop = 0;
  var isDown = false; // the socket dropped and is being dialled again
  var held = false; // a person holds the conversation (the agent does not answer)
  // Bumped by shutdown() and by a conversation switch: a late answer of an earlier session or conversation is dropped.
  var generation = 0;
  function stale(gen) {
    var e = new Error('superseded');
    e.stale = gen !== generation;
    return e.stale ? e : null;
  }

  // ---- DOM helpers: text goes in as text nodes, never as markup.
  function h(tag, props, kids) {
    var el = document.createElement(tag);
    for (var k in props || {}) {
      var v = props[k];
      if (v == null || v === false) continue;
      if (k === 'class') el.className = v;
      else if (k.slice(0, 2) === 'on') el.addEventListener(k.slice(2), v);
      else el.setAttribute(k, v);
    }
    (kids || []).forEach((c) => { if (c != null) el.append(c); });
    return el;
  }
  var SVG = 'http://www.w3.org/2000/svg';
  function s(tag, props, kids) {
    var el = document.createElementNS(SVG, tag);
    for (var k in props) el.setAttribute(k, props[k]);
    (kids || []).forEach((c) => { el.append(c); });
    return el;
  }
  function https(u) {
    try { var x = new URL(u); return x.protocol === 'https:' ? x.href : null; } catch (e) { return null; }
  }
  function link(url, kids) {
    return h('a', { href: url, target: '_blank', rel: 'noopener noreferrer' }, kids);
  }
  var ICON = {
    chat: '<svg viewBox="0 0 24 24" aria-hidden="true"><path fill="currentColor" d="M4 4h16a2 2 0 0 1 2 2v10a2 2 0 0 1-2 2H9l-5 4v-4a2 2 0 0 1-2-2V6a2 2 0 0 1 2-2z"/></svg>',
    down: '<svg viewBox="0 0 24 24" aria-hidden="true"><path fill="none" stroke="currentColor" stroke-width="2.5" stroke-linecap="round" d="M6 9l6 6 6-6"/></svg>',
    x: '<svg viewBox="0 0 24 24" aria-hidden="true"><path stroke="currentColor" stroke-width="2.2" stroke-linecap="round" d="M6 6l12 12M18 6 6 18"/></svg>',
    send: '<svg viewBox="0 0 24 24" aria-hidden="true"><path fill="currentColor" d="M3 20.5 21 12 3 3.5l.01 6.6L15 12 3.01 13.9z"/></svg>',
    mic: '<svg viewBox="0 0 24 24" aria-hidden="true"><path fill="currentColor" d="M12 14a3 3 0 0 0 3-3V5a3 3 0 0 0-6 0v6a3 3 0 0 0 3 3zm5-3a5 5 0 0 1-10 0H5a7 7 0 0 0 6 6.9V21h2v-3.1a7 7 0 0 0 6-6.9z"/></svg>',
  };

  // ---- Markdown subset: paragraphs, headings (as bold), bold, italics, inline code, code
  // blocks, lists, quotes, tables, https links. Anything else stays text.
  var INLINE = /(`+)([^`]+?)\1|\*\*(.+?)\*\*|__(.+?)__|\*(?=\S)(.+?)\*|\b_(?=\S)(.+?)_\b|\[([^\]]+)\]\(([^()\s]*(?:\([^()\s]*\)[^()\s]*)*)\)|(https:\/\/[^\s<>()]*[^\s<>().,;:!?'"])/g;
  function inline(text) {
    var out = [];
    var last = 0;
    for (var m of String(text).matchAll(INLINE)) {
      if (m.index > last) out.push(text.slice(last, m.index));
      last = m.index + m[0].length;
      var url = https(m[8] || m[9]);
      if (m[2]) out.push(h('code', {}, [m[2]]));
      else if (m[3] || m[4]) out.push(h('strong', {}, inline(m[3] || m[4])));
      else if (m[5] || m[6]) out.push(h('em', {}, inline(m[5] || m[6])));
      else if (m[7]) out.push(url ? link(url, inline(m[7])) : m[7]);
      else out.push(url ? link(url, [m[9]]) : m[9]);
    }
    if (last < text.length) out.push(text.slice(last));
    return out;
  }
  var LIST = /^\s*([-*+]|\d{1,9}[.)])\s+(.*)$/;
  var cells = (l) => l.trim().replace(/^\||\|$/g, '').split('|').map((c) => c.trim());
  var isTable = (l, next) => /^\s*\|.*\|\s*$/.test(l) && /^\s*\|?\s*:?-{2,}:?\s*(\|\s*:?-{2,}:?\s*)*\|?\s*$/.test(next || '');
  var isBlock = (l, next) => /^\s*(```|>|#{1,6}\s)/.test(l) || LIST.test(l) || isTable(l, next);
  function md(text) {
    var frag = document.createDocumentFragment();
    var lines = String(text || '').replace(/\r\n?/g, '\n').split('\n');
    var i = 0;
    var m;
    while (i < lines.length) {
      var line = lines[i];
      if (!line.trim()) { i++; continue; }
      if (/^\s*```/.test(line)) {
        var code = [];
        while (++i < lines.length && !/^\s*```/.test(lines[i])) code.push(lines[i]);
        i++;
        frag.append(h('pre', {}, [h('code', {}, [code.join('\n')])]));
      } else if ((m = /^\s*#{1,6}\s+(.*)$/.exec(line))) {
        frag.append(h('p', {}, [h('strong', {}, inline(m[1]))]));
        i++;
      } else if (/^\s*>/.test(line)) {
        var quote = [];
        while (i < lines.length && /^\s*>/.test(lines[i])) quote.push(lines[i++].replace(/^\s*> ?/, ''));
        frag.append(h('blockquote', {}, [md(quote.join('\n'))]));
      } else if (isTable(line, lines[i + 1])) {
        var head = cells(line);
        var align = cells(lines[i + 1]).map((c) => (/^:-+:$/.test(c) ? 'center' : /-:$/.test(c) ? 'right' : null));
        var body = h('tbody');
        i += 2;
        while (i < lines.length && /^\s*\|/.test(lines[i])) {
          body.append(h('tr', {}, cells(lines[i++]).slice(0, head.length).map((c, k) => h('td', { class: align[k] }, inline(c)))));
        }
        frag.append(h('table', {}, [h('thead', {}, [h('tr', {}, head.map((c, k) => h('th', { scope: 'col', class: align[k] }, inline(c))))]), body]));
      } else if ((m = LIST.exec(line))) {
        var ordered = /\d/.test(m[1]);
        var list = h(ordered ? 'ol' : 'ul', ordered && parseInt(m[1], 10) !== 1 ? { start: parseInt(m[1], 10) } : {});
        var li = null;
        while (i < lines.length) {
          m = LIST.exec(lines[i]);
          if (m && /\d/.test(m[1]) === ordered) list.append((li = h('li', {}, inline(m[2]))));
          else if (!m && li && /^\s+\S/.test(lines[i])) li.append(' ', ...inline(lines[i].trim()));
          else break;
          i++;
        }
        frag.append(list);
      } else {
        var p = h('p');
        do {
          if (p.firstChild) p.append(h('br'));
          p.append(...inline(lines[i++]));
        } while (i < lines.length && lines[i].trim() && !isBlock(lines[i], lines[i + 1]));
        frag.append(p);
      }
    }
    return frag;
  }
  /** What a screen reader hears of a reply: its text without the Markdown marks. */
  var plain = (text) => String(text || '')
    .replace(/\[([^\]]*)\]\([^)]*\)/g, '$1')
    .replace(/^\s*(?:[-*+]|\d{1,9}[.)])\s+/gm, '')
    .replace(/^\s*\|?\s*:?-{2,}:?\s*(\|\s*:?-{2,}:?\s*)*\|?\s*$/gm, ' ')
    .replace(/[*_`]+/g, '')
    .replace(/[#>|]+|-{3,}/g, ' ')
    .replace(/\s+/g, ' ')
    .trim();

  // ---- Charts: inline SVG built from the declarative spec (bar | line | pie), never code.
  var COLORS = ['#3057d5', '#c2530a', '#217a4f', '#b3245a', '#6741d9', '#4b5563'];
  function chart(c) {
    var labels = (c.labels || []).map(String);
    var series = (c.series || []).filter((x) => x && Array.isArray(x.values));
    if (!labels.length || !series.length) return null;
    var num = (v) => (isFinite(v) ? Number(v) : 0);
    var desc = series.map((x) => (series.length > 1 ? x.name + ': ' : '') + labels.map((l, i) => l + ' ' + num(x.values[i])).join(', ')).join('; ');
    var svg = s('svg', { viewBox: '0 0 300 170', role: 'img', 'aria-label': (c.title ? c.title + ', ' : '') + c.type + ' chart: ' + desc });
    var legend = [];
    var tip = (el, text) => { el.append(s('title', {}, [text])); return el; };
    if (c.type === 'pie') {
      var vals = series[0].values.map((v) => Math.max(0, num(v)));
      var total = vals.reduce((a, b) => a + b, 0) || 1;
      var a = -Math.PI / 2;
      var pt = (t) => (150 + 78 * Math.cos(t)).toFixed(2) + ' ' + (85 + 78 * Math.sin(t)).toFixed(2);
      vals.forEach((v, i) => {
        var fill = COLORS[i % COLORS.length];
        legend.push([labels[i] + ' (' + v + ')', fill]);
        if (!v) return;
        var b = a + (v / total) * 2 * Math.PI;
        svg.append(tip(v >= total ? s('circle', { cx: 150, cy: 85, r: 78, fill: fill }) : s('path', { fill: fill, d: 'M150 85L' + pt(a) + 'A78 78 0 ' + (b - a > Math.PI ? 1 : 0) + ' 1 ' + pt(b) + 'Z' }), labels[i] + ': ' + v));
        a = b;
      });
    } else {
      var all = [].concat(...series.map((x) => x.values.map(num)));
      var max = Math.max(0, ...all);
      var min = Math.min(0, ...all);
      if (max === min) max = min + 1;
      var L = 40, R = 294, T = 12, B = 136;
      var y = (v) => B - ((v - min) / (max - min)) * (B - T);
      var step = (R - L) / labels.length;
      var text = (x, yy, t, anchor) => s('text', { x: x, y: yy, 'text-anchor': anchor, 'font-size': 10, fill: '#3f3f46' }, [t]);
      var fmt = (v) => String(Math.round(v * 100) / 100);
      svg.append(s('line', { x1: L, x2: R, y1: y(0), y2: y(0), stroke: '#71717a' }), text(L - 4, T + 4, fmt(max), 'end'), text(L - 4, y(min) + 3, fmt(min), 'end'));
      labels.forEach((l, i) => {
        var room = Math.max(3, Math.floor(step / 6));
        svg.append(text(L + step * (i + 0.5), 154, l.length > room ? l.slice(0, room - 1) + '\u2026' : l, 'middle'));
      });
      series.forEach((x, k) => {
        var fill = COLORS[k % COLORS.length];
        legend.push([x.name, fill]);
        var w = (step * 0.7) / series.length;
        var points = labels.map((l, i) => {
          var v = num(x.values[i]);
          if (c.type === 'bar') {
            svg.append(tip(s('rect', { x: (L + step * i + step * 0.15 + w * k).toFixed(2), y: Math.min(y(v), y(0)).toFixed(2), width: Math.max(1, w - 1).toFixed(2), height: Math.abs(y(v) - y(0)).toFixed(2), fill: fill }), l + ': ' + v));
          }
          return (L + step * (i + 0.5)).toFixed(2) + ',' + y(v).toFixed(2);
        });
        if (c.type === 'line') {
          svg.append(s('polyline', { points: points.join(' '), fill: 'none', stroke: fill, 'stroke-width': 2 }));
          points.forEach((p, i) => { svg.append(tip(s('circle', { cx: p.split(',')[0], cy: p.split(',')[1], r: 3, fill: fill }), labels[i] + ': ' + num(x.values[i]))); });
        }
      });
      if (series.length < 2) legend = [];
    }
    return h('figure', { class: 'chart' }, [
      c.title ? h('figcaption', {}, [String(c.title)]) : null,
      svg,
      legend.length ? h('ul', { class: 'legend', 'aria-hidden': 'true' }, legend.map((e) => { var sw = h('span'); sw.style.background = e[1]; return h('li', {}, [sw, e[0]]); })) : null,
    ]);
  }

  function card(c) {
    var img = https(c.image_url);
    var buttons = (c.buttons || []).slice(0, 3).map((b) => {
      var url = https(b.url);
      if (url) return link(url, [String(b.label)]);
      return b.reply ? h('button', { type: 'button', onclick: () => { void send(b.reply); } }, [String(b.label)]) : null;
    });
    return h('div', { class: 'card' }, [
      img ? h('img', { src: img, alt: '', loading: 'lazy', referrerpolicy: 'no-referrer' }) : null,
      h('div', { class: 'ct' }, [String(c.title || '')]),
      c.text ? h('p', {}, [String(c.text)]) : null,
      buttons.some(Boolean) ? h('div', { class: 'cb' }, buttons) : null,
    ]);
  }

  /** A file's title from its name: "returns-policy_v2.md" → "Returns policy v2". */
  function titleOf(name) {
    var t = String(name || '').replace(/\.[a-z0-9]{1,5}$/i, '').replace(/[-_]+/g, ' ').replace(/\s+/g, ' ').trim();
    return t && t[0].toUpperCase() + t.slice(1);
  }

  // ---- Shell (static markup only; shadow root: host page CSS does not leak in, ours does not leak out)
  var host = document.createElement('div');
  host.setAttribute('data-concierge-widget', '');
  host.hidden = true; // shown once the site is known
  var root = host.attachShadow({ mode: 'open' });
  ICON.list = '<svg viewBox="0 0 24 24" aria-hidden="true"><path fill="currentColor" d="M4 6h16v2H4zm0 5h16v2H4zm0 5h10v2H4z"/></svg>';
  ICON.clip = '<svg viewBox="0 0 24 24" aria-hidden="true"><path fill="none" stroke="currentColor" stroke-width="2" stroke-linecap="round" d="M20 11.5l-7.8 7.8a5 5 0 0 1-7.1-7.1l8.5-8.5a3.3 3.3 0 0 1 4.7 4.7l-8.5 8.5a1.7 1.7 0 0 1-2.4-2.4l7.8-7.8"/></svg>';
  ICON.up = '<svg viewBox="0 0 24 24" aria-hidden="true"><path fill="currentColor" d="M2 21h4V9H2v12zm20-11a2 2 0 0 0-2-2h-6.3l1-4.6v-.3c0-.4-.2-.8-.4-1.1L13.2 1 6.6 7.6c-.4.4-.6.9-.6 1.4v10a2 2 0 0 0 2 2h9c.8 0 1.5-.5 1.8-1.2l3-7.1c.1-.2.2-.5.2-.7v-2z"/></svg>';
  ICON.down2 = '<svg viewBox="0 0 24 24" aria-hidden="true"><path fill="currentColor" d="M22 3h-4v12h4V3zM2 14a2 2 0 0 0 2 2h6.3l-1 4.6v.3c0 .4.2.8.4 1.1l1.1 1 6.6-6.6c.4-.4.6-.9.6-1.4V5a2 2 0 0 0-2-2H7c-.8 0-1.5.5-1.8 1.2l-3 7.1c-.1.2-.2.5-.2.7v2z"/></svg>';
  root.innerHTML =
    '<style>' +
    ':host{all:initial}*{box-sizing:border-box}[hidden]{display:none!important}' +
    '.w{--c:#243b6b;--on:#fff;--a:#243b6b;--bg:#fff;--fg:#1b1b1f;--mu:#52525b;--bu:#f0f2f7;--li:#e4e4e7;--fi:#71717a;--lk:#1d4ed8;--sb:#eef2ff;--sf:#1e3a8a;--ring:transparent;font:15px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;color:var(--fg)}' +
    '.w.dark{--bg:#18181b;--fg:#f4f4f5;--mu:#b4b4bd;--bu:#2a2a30;--li:#3f3f46;--fi:#8b8b95;--lk:#9db8ff;--sb:#23304f;--sf:#d3defc}' +
    'button,textarea,input{font:inherit;color:inherit}' +
    ':focus-visible{outline:3px solid #4c7dff;outline-offset:2px}' +
    '.sr{position:absolute;width:1px;height:1px;overflow:hidden;clip:rect(0 0 0 0);white-space:nowrap}' +
    '.launcher{position:fixed;right:20px;bottom:calc(20px + env(safe-area-inset-bottom));z-index:2147483000;min-width:56px;height:56px;border-radius:28px;border:0;background:var(--c);color:var(--on);cursor:pointer;box-shadow:0 0 0 3px var(--ring),0 4px 16px rgba(0,0,0,.25);display:flex;align-items:center;justify-content:center;gap:8px;padding:0 14px;transition:transform .15s}' +
    '.left .launcher,.left .panel{right:auto;left:20px}.launcher .ll{font-weight:600;font-size:15px}.launcher .ll:empty{display:none}.open .launcher .ll{display:none}' +
    '.launcher:hover{transform:scale(1.06)}.unread::after{content:"";position:absolute;top:2px;right:2px;width:14px;height:14px;border-radius:50%;background:#e11d48;border:2px solid #fff}.launcher svg{width:28px;height:28px}.open .launcher .i1,.launcher .i2{display:none}.open .launcher .i2{display:block}' +
    '.panel{position:fixed;right:20px;bottom:calc(88px + env(safe-area-inset-bottom));z-index:2147483000;width:380px;height:min(640px,calc(100vh - 112px));display:flex;flex-direction:column;background:var(--bg);border-radius:16px;box-shadow:0 8px 40px rgba(0,0,0,.22);overflow:hidden}' +
    '@media (max-width:479.98px){.panel,.left .panel{inset:0;width:100%;height:100vh;height:100dvh;border-radius:0;padding:env(safe-area-inset-top) env(safe-area-inset-right) env(safe-area-inset-bottom) env(safe-area-inset-left)}.open .launcher{display:none}}' +
    'header{display:flex;align-items:center;gap:10px;padding:12px 14px;background:var(--c);color:var(--on)}' +
    '.av{width:36px;height:36px;flex:none;border-radius:50%;background:rgba(127,127,127,.25);display:grid;place-items:center;font-weight:700}' +
    'h2{flex:1;margin:0;font-size:16px;font-weight:600;overflow:hidden;text-overflow:ellipsis;white-space:nowrap}' +
    'header button{width:44px;height:44px;margin:-6px -8px -6px 0;border:0;background:none;color:inherit;cursor:pointer;border-radius:8px;display:grid;place-items:center}header svg{width:22px;height:22px}' +
    '.conn,.err{padding:6px 14px;font-size:13px;background:#fff4d6;color:#5c4200}.err{background:#fdecee;color:#8a0016}' +
    '.log{position:relative;flex:1;overflow-y:auto;padding:14px;overscroll-behavior:contain}.log,.msgs{display:flex;flex-direction:column;gap:10px}' +
    '.row{display:flex;flex-direction:column;align-items:flex-start;max-width:88%}.row.user{align-self:flex-end;align-items:flex-end}' +
    '.who{font-size:12px;color:var(--mu);margin:0 4px 2px;display:flex;align-items:center;gap:6px}.who img{width:20px;height:20px;border-radius:50%;object-fit:cover}' +
    '.b{padding:8px 12px;border-radius:14px;background:var(--bu);overflow-wrap:anywhere;max-width:100%}' +
    '.user .b{background:var(--c);color:var(--on);white-space:pre-wrap;border-end-end-radius:4px}.assistant .b{border-start-start-radius:4px}' +
    '.b p,.b ul,.b ol,.b blockquote,.b pre,.b table{margin:0 0 .6em}.b>:last-child{margin-bottom:0}.b ul,.b ol{padding-inline-start:1.3em}' +
    '.b blockquote{border-inline-start:3px solid #b8bfd0;padding-inline-start:8px;color:var(--mu)}.b a,.src a,.att a{color:var(--lk)}' +
    '.b code{font:13px ui-monospace,monospace;background:rgba(127,127,127,.18);padding:1px 4px;border-radius:4px}.b pre{white-space:pre-wrap}.b pre code{background:none;padding:0}' +
    '.b table{border-collapse:collapse;font-size:13px;background:var(--bg)}.b th,.b td{border:1px solid var(--li);padding:3px 6px;text-align:start}.b .center{text-align:center}.b .right{text-align:end}' +
    '.meta{display:flex;align-items:center;gap:6px;margin:2px 4px 0;font-size:11px;color:var(--mu)}.meta button{border:0;background:none;color:var(--mu);cursor:pointer;width:28px;height:28px;border-radius:6px;display:grid;place-items:center}.meta button svg{width:14px;height:14px}.meta button[aria-pressed=true]{color:var(--a);background:var(--sb)}' +
    '.failed .b{opacity:.75}.note{font-size:12px;color:var(--mu);margin:3px 4px 0;display:flex;gap:8px;align-items:center}.note.bad{color:#c0002a}.dark .note.bad{color:#ff9aa8}' +
    '.note button,.more,.chips button,.card button,.card a,.hs button,.convs button.nc,.convs button.bk{border:1px solid var(--a);color:var(--a);background:var(--bg);border-radius:16px;padding:4px 12px;cursor:pointer;font-size:13px;text-decoration:none;min-height:32px}' +
    '.dots{display:inline-flex;gap:4px;padding:4px 0}.dots i{width:7px;height:7px;border-radius:50%;background:var(--fi);animation:bl 1s infinite}.dots i:nth-child(2){animation-delay:.2s}.dots i:nth-child(3){animation-delay:.4s}' +
    '@keyframes bl{50%{opacity:.3}}@media (prefers-reduced-motion:reduce){.dots i{animation:none}.launcher{transition:none}}' +
    '.x{display:flex;flex-direction:column;gap:8px;margin-top:6px;width:100%}' +
    '.src{display:flex;flex-wrap:wrap;gap:6px;list-style:none;margin:6px 0 0;padding:0;font-size:12px}.src li{background:var(--sb);color:var(--sf);border-radius:12px;padding:2px 10px}.src a{color:inherit}.src:not(.att)::before{content:attr(data-label) / "";color:var(--mu);padding:2px 0}' +
    '.card{border:1px solid var(--li);border-radius:12px;overflow:hidden;background:var(--bg);width:260px;max-width:100%}.card img{display:block;width:100%;max-height:150px;object-fit:cover}' +
    '.ct{font-weight:600;padding:8px 12px 0}.card p{margin:4px 12px 0;font-size:14px}.cb{display:flex;flex-wrap:wrap;gap:6px;padding:10px 12px}.card a{display:inline-flex;align-items:center}' +
    '.chart{margin:0;background:#fff;color:#1b1b1f;border:1px solid var(--li);border-radius:12px;padding:8px;width:300px;max-width:100%}.chart svg{display:block;width:100%;height:auto}figcaption{font-weight:600;font-size:13px}' +
    '.legend{display:flex;flex-wrap:wrap;gap:4px 10px;list-style:none;margin:4px 0 0;padding:0;font-size:12px}.legend span{display:inline-block;width:10px;height:10px;border-radius:2px;margin-inline-end:4px}' +
    '.att a{font-size:13px}.user .att li{background:var(--bu);color:var(--fg)}' +
    '.more{align-self:center}.pill{position:absolute;left:50%;transform:translateX(-50%);bottom:8px;z-index:1;border:0;border-radius:16px;padding:6px 14px;min-height:32px;background:var(--c);color:var(--on);font-size:13px;cursor:pointer;box-shadow:0 2px 8px rgba(0,0,0,.25)}' +
    '.foot{position:relative}.chips{display:flex;flex-wrap:wrap;gap:6px;padding:0 14px 8px;justify-content:flex-end}' +
    '.hs{padding:8px 14px;font-size:13px;border-top:1px solid var(--li);background:var(--sb);color:var(--sf)}.hs p{margin:0}.em{display:flex;gap:6px;margin-top:6px}.em input{flex:1;min-width:0;min-height:36px;padding:4px 10px;border:1px solid var(--fi);border-radius:18px;background:var(--bg);color:var(--fg)}' +
    '.rate{display:flex;align-items:center;gap:2px;flex-wrap:wrap;padding:4px 14px;font-size:13px;color:var(--mu)}.rate .rq{margin-inline-end:4px}.rate button{border:0;background:none;cursor:pointer;font-size:18px;line-height:1;width:28px;height:32px;padding:0;color:var(--fi);border-radius:6px}.rate button[aria-pressed=true]{color:#b45309}' +
    '.convs{flex:1;overflow-y:auto;padding:12px 14px;display:flex;flex-direction:column;gap:8px}.convs h3{margin:0;font-size:14px}.convs ul{list-style:none;margin:0;padding:0;display:flex;flex-direction:column;gap:6px}' +
    '.convs li button{display:block;width:100%;text-align:start;border:1px solid var(--li);background:var(--bg);border-radius:10px;padding:8px 10px;cursor:pointer}.convs li b{display:block;font-size:14px}.convs li span{display:block;font-size:12px;color:var(--mu);overflow:hidden;text-overflow:ellipsis;white-space:nowrap}' +
    '.files{list-style:none;margin:0;padding:6px 12px 0;display:flex;flex-wrap:wrap;gap:6px;font-size:12px}.files li{display:flex;align-items:center;gap:6px;background:var(--bu);border-radius:12px;padding:2px 4px 2px 10px;max-width:100%}.files li.bad{color:#c0002a}.files progress{width:60px}.files button{border:0;background:none;cursor:pointer;width:28px;height:28px;border-radius:50%;display:grid;place-items:center}.files svg{width:14px;height:14px}' +
    '.dropz{position:absolute;inset:0;z-index:2;display:grid;place-items:center;background:rgba(36,59,107,.85);color:#fff;font-weight:600;font-size:16px;border:3px dashed #fff;border-radius:inherit;pointer-events:none}' +
    '.cf{display:flex;align-items:flex-end;gap:8px;padding:10px 12px;border-top:1px solid var(--li)}' +
    'textarea{flex:1;resize:none;font-size:16px;line-height:1.4;padding:9px 12px;border:1px solid var(--fi);border-radius:20px;min-height:44px;max-height:140px;background:var(--bg);color:var(--fg);overflow-y:auto}' +
    '.mic,.clip{width:44px;height:44px;flex:none;border:1px solid var(--a);border-radius:50%;background:var(--bg);color:var(--a);cursor:pointer;display:grid;place-items:center}.mic svg,.clip svg{width:20px;height:20px}.mic[aria-pressed=true]{background:#c81e3a;border-color:#c81e3a;color:#fff}' +
    '.vc{display:flex;flex-direction:column;gap:6px;padding:8px 12px;border-top:1px solid var(--li);font-size:14px}.vs{font-weight:600}' +
    '.vt{max-height:120px;overflow-y:auto}.vt:empty{display:none}.vt p{margin:0 0 4px}.vt b{margin-inline-end:4px}.vt .partial span{color:var(--mu)}' +
    '.vend{align-self:flex-start;border:0;border-radius:16px;padding:4px 14px;min-height:32px;background:#c81e3a;color:#fff;cursor:pointer;font-size:13px}[data-state=ended] .vend{background:#52525b}' +
    '.send{width:44px;height:44px;flex:none;border:0;border-radius:50%;background:var(--c);color:var(--on);cursor:pointer;display:grid;place-items:center}.send svg{width:20px;height:20px}[dir=rtl] .send svg{transform:scaleX(-1)}.send:disabled{background:#a1a1aa;color:#fff;cursor:default}' +
    '</style>' +
    '<div class="w">' +
    '<button type="button" class="launcher" aria-expanded="false" aria-controls="cw-panel"><span class="i1">' + ICON.chat + '</span><span class="i2">' + ICON.down + '</span><span class="ll"></span></button>' +
    '<section class="panel" id="cw-panel" role="dialog" hidden>' +
    '<header><div class="av" aria-hidden="true"></div><h2 class="title"></h2><button type="button" class="hist" aria-expanded="false" hidden>' + ICON.list + '</button><button type="button" class="close">' + ICON.x + '</button></header>' +
    '<div class="conn" role="status"></div>' +
    '<div class="err" role="alert" hidden></div>' +
    '<div class="convs" hidden><h3 class="ch" tabindex="-1"></h3><ul></ul><p class="none" hidden></p><button type="button" class="nc"></button><button type="button" class="bk"></button></div>' +
    '<div class="log" role="log" aria-live="off" tabindex="0"><button type="button" class="more" hidden></button><div class="msgs"></div></div>' +
    '<div class="foot"><button type="button" class="pill" hidden></button></div>' +
    '<div class="hs" hidden><p class="hsl" role="status"></p><form class="em" hidden novalidate><label class="sr" for="cw-email"></label><input id="cw-email" type="email" autocomplete="email" maxlength="254"><button type="submit" class="es"></button></form></div>' +
    '<div class="rate" role="group" hidden></div>' +
    '<div class="chips" hidden></div>' +
    '<div class="sr tstat" role="status"></div><div class="sr say" aria-live="polite"></div>' +
    '<div class="vc" hidden><div class="vs" role="status"></div><div class="vt" role="log" aria-live="off" tabindex="0"></div><button type="button" class="vend"></button></div>' +
    '<ul class="files" hidden></ul>' +
    '<form class="cf"><button type="button" class="clip" hidden>' + ICON.clip + '</button><input type="file" class="fin" multiple hidden tabindex="-1"><label class="sr" for="cw-input"></label><textarea id="cw-input" rows="1" dir="auto" maxlength="10000"></textarea>' +
    '<button type="button" class="mic" aria-pressed="false" hidden>' + ICON.mic + '</button>' +
    '<button type="submit" class="send" disabled>' + ICON.send + '</button></form>' +
    '<div class="dropz" hidden></div>' +
    '</section>' +
    '</div>';
  var $ = (sel) => root.querySelector(sel);
  var wrap = $('.w');
  var panel = $('.panel');
  var launcher = $('.launcher');
  var log = $('.log');
  var msgs = $('.msgs');
  var more = $('.more');
  var pill = $('.pill');
  var conn = $('.conn');
  var errEl = $('.err');
  var chips = $('.chips');
  var typing = $('.tstat');
  var say = $('.say');
  var input = $('textarea');
  var sendBtn = $('.send');
  var form = $('.cf');
  var hs = $('.hs');
  var emailForm = $('.em');
  var rateEl = $('.rate');
  var convs = $('.convs');
  var histBtn = $('.hist');
  var clip = $('.clip');
  var fileIn = $('.fin');
  var filesEl = $('.files');
  var dropz = $('.dropz');
  conn.hidden = true;

  /** Every fixed word of the shell, in the widget's language (again when the site's language is learnt). */
  function relabel() {
    wrap.setAttribute('lang', lang);
    wrap.setAttribute('dir', lang === 'ar' ? 'rtl' : 'ltr');
    launcher.setAttribute('aria-label', isOpen ? t('minimize') : launcher.classList.contains('unread') ? t('openNew') : t('open'));
    panel.setAttribute('aria-label', t('chatWith', { name: agentName }));
    $('.title').textContent = agentName;
    $('.close').setAttribute('aria-label', t('close'));
    histBtn.setAttribute('aria-label', t('yours'));
    log.setAttribute('aria-label', t('messages'));
    more.textContent = t('earlier');
    pill.textContent = t('newMsg');
    $('label[for=cw-input]').textContent = t('message');
    input.placeholder = t('placeholder');
    sendBtn.setAttribute('aria-label', t('send'));
    micBtn.setAttribute('aria-label', t('call'));
    clip.setAttribute('aria-label', t('attach'));
    filesEl.setAttribute('aria-label', t('attachments'));
    $('label[for=cw-email]').textContent = t('email');
    $('#cw-email').placeholder = t('email');
    $('.es').textContent = t('save');
    $('.ch').textContent = t('yours');
    $('.nc').textContent = t('newConv');
    $('.bk').textContent = t('backToChat');
    $('.none').textContent = t('noConvs');
    $('.vt').setAttribute('aria-label', t('transcript'));
    dropz.textContent = t('drop');
    rateEl.setAttribute('aria-label', t('rate'));
  }

  // ---- The site's look: brand colour (with readable text on it), side, launcher label, dark mode; contrast is
  // checked against the host page, and the launcher gets a ring when it would not stand out (WCAG 1.4.11, 3:1).
  function rgbOf(c) {
    var m = /^#([0-9a-f]{6})$/i.exec(c || '');
    if (m) return [0, 2, 4].map((i) => parseInt(m[1].slice(i, i + 2), 16));
    m = /rgba?\(\s*(\d+)[,\s]+(\d+)[,\s]+(\d+)(?:[,\s/]+([\d.]+))?/.exec(c || '');
    if (!m || (m[4] !== undefined && Number(m[4]) === 0)) return null;
    return [Number(m[1]), Number(m[2]), Number(m[3])];
  }
  function luminance(rgb) {
    var v = rgb.map((x) => { x /= 255; return x <= 0.03928 ? x / 12.92 : Math.pow((x + 0.055) / 1.055, 2.4); });
    return 0.2126 * v[0] + 0.7152 * v[1] + 0.0722 * v[2];
  }
  function contrast(a, b) {
    var x = luminance(a), y = luminance(b);
    return (Math.max(x, y) + 0.05) / (Math.min(x, y) + 0.05);
  }
  /** The host page's background where the launcher sits: the first opaque background from body up, else white. */
  function pageBackground() {
    for (var el = document.body; el; el = el.parentElement) {
      var c = rgbOf(getComputedStyle(el).backgroundColor);
      if (c) return c;
    }
    return [255, 255, 255];
  }
  var dark = false;
  function applyLook(a) {
    a = a || {};
    var brand = rgbOf(a.brand_color) ? a.brand_color : '#243b6b';
    var rgb = rgbOf(brand);
    var theme = a.theme || 'auto';
    dark = theme === 'dark' || (theme === 'auto' && window.matchMedia && matchMedia('(prefers-color-scheme: dark)').matches);
    wrap.classList.toggle('dark', dark);
    wrap.classList.toggle('left', a.position === 'left');
    wrap.style.setProperty('--c', brand);
    // Text on the brand colour: white or near-black, whichever reads better.
    var on = contrast(rgb, [255, 255, 255]) >= contrast(rgb, [17, 17, 17]) ? '#ffffff' : '#111111';
    wrap.style.setProperty('--on', on);
    // Brand-coloured text and borders on the panel only where they read (4.5:1); else the text colour.
    var bg = dark ? [24, 24, 27] : [255, 255, 255];
    wrap.style.setProperty('--a', contrast(rgb, bg) >= 4.5 ? brand : dark ? '#f4f4f5' : '#1b1b1f');
    var page = pageBackground();
    var ring = contrast(rgb, page) >= 3 ? 'transparent' : contrast(page, [255, 255, 255]) >= contrast(page, [17, 17, 17]) ? '#ffffff' : '#111111';
    wrap.style.setProperty('--ring', ring);
    launcher.setAttribute('data-ring', ring);
    $('.ll').textContent = a.launcher_label || '';
    var l = pickLanguage(a.language);
    if (l !== lang) {
      lang = l;
      relabel();
    }
  }

  // ---- Open / closed, remembered per site.
  var isOpen = false;
  var phone = () => window.innerWidth < 480;
  function setOpen(open, byUser) {
    isOpen = open;
    panel.hidden = !open;
    wrap.classList.toggle('open', open);
    launcher.setAttribute('aria-expanded', String(open));
    if (open) launcher.classList.remove('unread');
    launcher.setAttribute('aria-label', open ? t('minimize') : t('open'));
    // At phone size the panel covers the page: a modal dialog, focus kept inside.
    if (open && phone()) panel.setAttribute('aria-modal', 'true');
    else panel.removeAttribute('aria-modal');
    store.set(openKey, open ? '1' : '0');
    if (open) {
      syncInput();
      if (!following) log.scrollTop = log.scrollHeight;
      if (byUser) input.focus();
      void ensureSession();
    } else if (byUser) launcher.focus();
    emit(open ? 'open' : 'close', {});
  }
  launcher.addEventListener('click', () => { setOpen(!isOpen, true); });
  $('.close').addEventListener('click', () => { setOpen(false, true); });
  var FOCUSABLE = 'button:not([disabled]),textarea,input:not([type=file]),a[href],[tabindex="0"]';
  panel.addEventListener('keydown', (ev) => {
    if (ev.key === 'Escape') { ev.preventDefault(); setOpen(false, true); return; }
    if (ev.key !== 'Tab' || panel.getAttribute('aria-modal') !== 'true') return;
    // The focus trap of the full-screen sheet: Tab from the last control goes to the first, and back.
    var all = Array.prototype.filter.call(panel.querySelectorAll(FOCUSABLE), (el) => el.offsetParent !== null || el === document.activeElement);
    if (!all.length) return;
    var first = all[0], last = all[all.length - 1], at = root.activeElement;
    if (ev.shiftKey && (at === first || !panel.contains(at))) { ev.preventDefault(); last.focus(); }
    else if (!ev.shiftKey && (at === last || !panel.contains(at))) { ev.preventDefault(); first.focus(); }
  });
  window.addEventListener('resize', () => {
    if (isOpen && phone()) panel.setAttribute('aria-modal', 'true');
    else panel.removeAttribute('aria-modal');
  });

  function showError(message) {
    errEl.textContent = message || '';
    errEl.hidden = !message;
  }

  // ---- Friendly words for error codes (the API's envelope codes and the socket's).
  var ERRORS = {
    offline: 'offline', rate_limited: 'rate_limited', task_in_progress: 'task_in_progress', conversation_closed: 'conversation_closed',
    identity_verification_failed: 'identity', identity_verification_required: 'identity', no_workflow_configured: 'unavailable',
    workflow_provisioning: 'starting', workflow_execution_failed: 'failedTurn', server: 'server',
  };
  function friendly(e) {
    var code = !e.status ? 'offline' : ERRORS[e.code] ? e.code : e.status >= 500 ? 'server' : '';
    return code ? t(ERRORS[code]) : t('notSent');
  }

  // ---- Messages: a row holds the speaker's name, the bubble, its time (and, for answers, thumbs), then its elements and notes.
  function byId(id) {
    var b = id ? msgs.querySelector('.msg[data-id="' + CSS.escape(id) + '"]') : null;
    return b && b.parentNode;
  }
  var stamp = (d) => d.toLocaleString(lang, { dateStyle: 'medium', timeStyle: 'short' });
  /** The visible time: the hour today, the date and hour before. */
  function shortTime(d) {
    var today = new Date().toDateString() === d.toDateString();
    return today ? d.toLocaleTimeString(lang, { hour: 'numeric', minute: '2-digit' }) : d.toLocaleString(lang, { month: 'short', day: 'numeric', hour: 'numeric', minute: '2-digit' });
  }
  function setTime(row, when) {
    var d = new Date(when || Date.now());
    if (isNaN(d)) d = new Date();
    var el = row.querySelector('.meta time');
    el.setAttribute('datetime', d.toISOString());
    el.title = stamp(d);
    el.textContent = shortTime(d);
  }
  function who(opts) {
    if (opts.author !== 'human') return [agentName];
    var pic = https(opts.author_avatar_url);
    // A picture that does not load is left out (no broken-image icon beside the name).
    var img = pic ? h('img', { src: pic, alt: '', referrerpolicy: 'no-referrer' }) : null;
    if (img) img.addEventListener('error', () => { img.remove(); });
    return [img, opts.author_name || t('team')];
  }
  function addRow(role, id, opts, before) {
    var user = role === 'user';
    var row = h('div', { class: 'row ' + (user ? 'user' : 'assistant') }, [
      h('div', { class: user ? 'who sr' : 'who' }, user ? [t('you')] : who(opts)),
      h('div', { class: 'b msg ' + (user ? 'user' : 'assistant'), 'data-id': id, dir: 'auto' }),
      h('div', { class: 'meta' }, [h('time')]),
    ]);
    row.b = row.children[1];
    row.human = opts.author === 'human';
    setTime(row, opts.timestamp);
    if (opts.greeting) {
      row.b.classList.remove('msg');
      row.lastChild.remove();
    }
    fill(row, opts);
    msgs.insertBefore(row, before || null);
    return row;
  }

  /** Thumbs up and down under an answer of the agent (not under a person's, nor the greeting). */
  function thumbs(row) {
    if (row.human || row.querySelector('.fb') || !row.b.getAttribute('data-id') || row.b.classList.contains('live')) return;
    var mk = (rating, icon, label) => {
      var b = h('button', { type: 'button', class: 'fb', 'aria-pressed': 'false', 'aria-label': t(label), title: t(label), 'data-rating': rating });
      b.innerHTML = icon;
      b.addEventListener('click', () => {
        var on = b.getAttribute('aria-pressed') === 'true';
        var id = row.b.getAttribute('data-id');
        row.querySelectorAll('.fb').forEach((x) => { x.setAttribute('aria-pressed', 'false'); });
        if (!on) b.setAttribute('aria-pressed', 'true');
        api('POST', 'feedback', { conversation_id: session.conversation_id, reply_id: id, rating: on ? null : rating, user_context: userContext() })
          .then(() => { if (!on) say.textContent = t('thanks'); emit('feedback', { reply_id: id, rating: on ? null : rating }); })
          .catch((e) => { b.setAttribute('aria-pressed', String(on)); showError(friendly(e)); });
      });
      return b;
    };
    row.querySelector('.meta').append(mk('up', ICON.up, 'helpful'), mk('down', ICON.down2, 'notHelpful'));
  }

  /** Renders a reply (or history message) into its row: text, then attachments, cards, charts and sources. */
  function fill(row, m) {
    row.text = m.text || '';
    row.b.textContent = '';
    // The visitor's own words are shown as typed; the agent's are Markdown.
    if (row.classList.contains('user')) row.b.textContent = row.text;
    else row.b.append(md(row.text));
    row.b.hidden = !row.text && row.classList.contains('user') && Boolean((m.attachments || []).length);
    var old = row.querySelector('.x');
    if (old) old.remove();
    var atts = (m.attachments || []).map((a) => {
      var url = a && (a.file_url || a.url);
      var name = String((a && (a.file_name || a.name)) || 'Attachment');
      // Signed media links may be plain http on a local install; never javascript: and the like.
      return typeof url === 'string' && /^https?:\/\//i.test(url) ? h('li', {}, [link(url, [name])]) : a && a.file_name ? h('li', {}, [name]) : null;
    }).filter(Boolean);
    var seen = {};
    var sources = [];
    (m.citations || []).forEach((c) => {
      var title = c && (c.title || titleOf(c.file_name));
      if (!title || seen[title]) return;
      seen[title] = 1;
      // A link only where the business made the document downloadable (or it is a public page); else only its name.
      var url = c.url && (https(c.url) || (/^http:\/\/(localhost|127\.0\.0\.1)[:/]/.test(c.url) ? c.url : null));
      sources.push(h('li', {}, [url ? link(url, [title]) : title]));
    });
    var parts = [].concat(
      atts.length ? [h('ul', { class: 'att src', 'aria-label': t('attachments') }, atts)] : [],
      (m.cards || []).map(card),
      (m.charts || []).map(chart),
      sources.length ? [h('ul', { class: 'src', 'aria-label': t('sources'), 'data-label': t('sources') }, sources)] : [],
    ).filter(Boolean);
    if (parts.length) row.insertBefore(h('div', { class: 'x' }, parts), row.querySelector('.note'));
  }

  function note(row, text, bad, retry) {
    var old = row.querySelector('.note');
    if (old) old.remove();
    if (!text) return;
    row.append(h('div', { class: bad ? 'note bad' : 'note' }, [
      h('span', bad ? { role: 'alert' } : {}, [text]),
      retry ? h('button', { type: 'button', onclick: retry }, [t('retry')]) : null,
    ]));
  }

  function liveRow(replyId) {
    var row = byId(replyId);
    // No dots for a reply that will not come from the agent: the conversation is with a person.
    if (!row && !failed[replyId] && !unanswered[replyId]) {
      row = addRow('assistant', replyId, {});
      row.b.classList.add('live', 'typing');
      row.b.setAttribute('aria-busy', 'true');
      row.b.append(h('span', { class: 'dots', 'aria-hidden': 'true' }, [h('i'), h('i'), h('i')]));
      typing.textContent = t('typing', { name: agentName });
    }
    return row;
  }
  function dropLive(replyId) {
    var row = byId(replyId);
    if (row && row.b.classList.contains('live')) row.remove();
    if (!msgs.querySelector('.live')) typing.textContent = '';
  }
  // ---- Scrolling: a new reply is brought in from its top; the log follows a growing reply
  // only while the visitor is at the bottom, and never past the reply's first line.
  var atBottom = () => log.scrollHeight - log.scrollTop - log.clientHeight < 40;
  function toBottom() {
    following = null;
    log.scrollTop = log.scrollHeight;
  }
  function settle(row, wasBottom, isNew) {
    if (wasBottom || following === row) {
      following = row;
      var target = Math.min(log.scrollHeight - log.clientHeight, row.offsetTop - 8);
      if (target > log.scrollTop) log.scrollTop = target;
    } else if (isNew) {
      pill.hidden = false;
      pill.row = row;
    }
  }
  log.addEventListener('scroll', () => {
    // Scrolling up is the visitor's doing (the widget only ever scrolls down): stop following.
    if (log.scrollTop < lastTop - 2) following = null;
    lastTop = log.scrollTop;
    if (atBottom()) pill.hidden = true;
  });
  pill.addEventListener('click', () => {
    pill.hidden = true;
    log.scrollTop = pill.row ? pill.row.offsetTop - 8 : log.scrollHeight;
    log.focus();
  });

  function setChips(actions) {
    chips.textContent = '';
    (actions || []).forEach((label) => {
      chips.append(h('button', { type: 'button', onclick: () => { void send(label); } }, [String(label)]));
    });
    chips.hidden = !chips.firstChild;
  }

  // ---- HTTP: every widget call carries the site id; the browser adds Origin.
  function api(method, path, body) {
    var headers = { 'X-Concierge-Site': siteId };
    if (body) headers['Content-Type'] = 'application/json';
    return fetch(apiBase + '/api/public/widget/' + path, {
      method: method,
      headers: headers,
      body: body ? JSON.stringify(body) : undefined,
      credentials: 'omit',
      // Same-origin GETs carry no Origin; the server then reads the page's origin from Referer.
      referrerPolicy: 'origin',
    }).then((res) => res.json().catch(() => null).then((data) => {
      if (res.ok) return data;
      var err = new Error((data && data.message) || 'Request failed (' + res.status + ')');
      err.code = (data && data.error) || 'http_' + res.status;
      err.status = res.status;
      throw err;
    }));
  }

  function uuid() {
    // randomUUID needs a secure context; any unique string will do.
    return crypto.randomUUID ? crypto.randomUUID() : Array.from(crypto.getRandomValues(new Uint8Array(16)), (x) => (x + 256).toString(16).slice(1)).join('');
  }

  // ---- Socket: receive-only; any frame proves it alive.
  function connect() {
    clearTimeout(retryTimer);
    var url = new URL(apiBase + '/api/chat/connect');
    url.protocol = url.protocol === 'https:' ? 'wss:' : 'ws:';
    url.searchParams.set('site_id', siteId);
    url.searchParams.set('conversation_id', session.conversation_id);
    var after = lastShownId();
    if (after) url.searchParams.set('after', after);
    var ws = new WebSocket(url.href);
    sock = ws;
    var opened;
    sockOpen = new Promise((resolve) => { opened = resolve; });
    ws.onopen = () => {
      if (sock !== ws) return;
      retryDelay = 1000;
      isDown = false;
      conn.hidden = true;
      armSilence();
      opened();
    };
    ws.onmessage = (ev) => {
      if (sock !== ws) return;
      armSilence();
      var frame;
      try { frame = JSON.parse(ev.data); } catch (e) { return; }
      onFrame(frame);
    };
    ws.onclose = () => {
      if (sock !== ws) return;
      down();
      opened();
      retryTimer = setTimeout(connect, retryDelay);
      retryDelay = Math.min(retryDelay * 2, 30000);
    };
  }
  function down() {
    sock = null;
    isDown = true;
    clearTimeout(silenceTimer);
    conn.textContent = t('reconnecting');
    conn.hidden = false;
  }
  function armSilence() {
    clearTimeout(silenceTimer);
    silenceTimer = setTimeout(() => {
      // A half-open socket may take long to report its close: drop it and dial again now.
      var dead = sock;
      sock = null;
      if (dead) dead.close();
      connect();
    }, silenceMs);
  }
  window.addEventListener('offline', () => {
    if (!session || !sock) return;
    var dead = sock;
    down();
    dead.close();
  });
  window.addEventListener('online', () => {
    // Back online: dial now rather than at the end of the back-off (a dial started offline is dropped).
    if (!session || !isDown) return;
    var stale = sock;
    sock = null;
    if (stale) stale.close();
    retryDelay = 1000;
    connect();
  });

  // The id of the newest message shown: what a reconnecting socket asks to be replayed after.
  function lastShownId() {
    var all = msgs.querySelectorAll('.msg[data-id]:not(.live)');
    return all.length ? all[all.length - 1].getAttribute('data-id') : null;
  }

  function onFrame(frame) {
    if (!frame || typeof frame.type !== 'string' || frame.type === 'ping') return;
    var wasBottom = atBottom();
    if (frame.type === 'visitor_message') {
      // The visitor's own message sent from another tab or device: shown once, before the reply that answers it.
      var known = byId(frame.message_id) || Array.prototype.some.call(msgs.querySelectorAll('.row.user'), (r) => r.cid && r.cid === frame.client_message_id);
      if (!known) {
        addRow('user', frame.message_id, frame, byId(frame.reply_id));
        if (wasBottom) toBottom();
      }
      emit('message:received', frame);
      return;
    }
    var row = byId(frame.reply_id);
    var isNew = !row;
    if (frame.type === 'reply_delta') {
      row = liveRow(frame.reply_id);
      // A delta for a reply already shown in full (a replay) is stale.
      if (row && row.b.classList.contains('live')) {
        row.b.classList.remove('typing');
        // `reset`: the turn runs again after its stream was cut off; the partial answer is dropped, not extended.
        fill(row, { text: (frame.reset ? '' : row.text || '') + (frame.text || '') });
        settle(row, wasBottom, isNew);
      }
    } else if (frame.type === 'reply') {
      // Authoritative: replaces the live bubble (or a copy shown before a reconnect).
      var shown = row && !row.b.classList.contains('live');
      if (row && !shown && frame.author === 'human') { row.remove(); row = null; }
      row = row || addRow('assistant', frame.reply_id, frame);
      row.b.classList.remove('live', 'typing');
      row.b.removeAttribute('aria-busy');
      if (!shown) setTime(row);
      fill(row, frame);
      thumbs(row);
      if (!msgs.querySelector('.live')) typing.textContent = '';
      if (frame.suggested_actions) setChips(frame.suggested_actions);
      // Announced once, the final text only (the log itself is not a live region: deltas are silent).
      if (!shown && frame.text) say.textContent = (frame.author === 'human' ? frame.author_name || t('team') : agentName) + ': ' + plain(frame.text);
      // Closed: the launcher shows a dot and says there is something new.
      if (!shown && !isOpen) {
        launcher.classList.add('unread');
        launcher.setAttribute('aria-label', t('openNew'));
      }
      if (!shown && frame.author !== 'human') showRating();
      settle(row, wasBottom, isNew);
    } else if (frame.type === 'handoff') {
      // A person holds the conversation (or handed it back): the status line says who answers; a held turn's
      // reply will not come from the agent, so its typing dots go.
      if (frame.reply_id) {
        unanswered[frame.reply_id] = true;
        dropLive(frame.reply_id);
      }
      setHeld(Boolean(frame.active));
    } else if (frame.type === 'suggested_actions') {
      setChips(frame.suggested_actions);
    } else if (frame.type === 'error') {
      failed[frame.reply_id] = frame.code || 'workflow_execution_failed';
      dropLive(frame.reply_id);
      // The message it answers gets the news (now, or when its 202 comes back after this frame).
      if (pending[frame.reply_id]) turnFailed(pending[frame.reply_id], failed[frame.reply_id]);
    } else if (frame.type === 'task_status') {
      conn.textContent = frame.status === 'running' ? frame.label + '\u2026' : '';
      conn.hidden = frame.status !== 'running';
    } else if (frame.type === 'ui:command') {
      emit('ui:command', { command: frame.command, args: frame.args });
    }
    emit('message:received', frame);
  }

  /**
   * The turn failed: the message says so, and Retry sends the same message again (its client_message_id kept): the
   * server runs the turn again on the message it stored, so the question is stored once and answered once.
   */
  function turnFailed(row, code) {
    note(row, t(ERRORS[code] || 'failedTurn'), true, () => {
      void send(row.text, row);
    });
  }

  // ---- The hand-off: while a person holds the conversation, a status line instead of typing dots; when nobody
  // of the team is available (outside business hours, or away), the visitor can leave an email.
  function whenBack(iso) {
    var d = new Date(iso);
    if (isNaN(d)) return '';
    var sameDay = new Date().toDateString() === d.toDateString();
    return sameDay ? d.toLocaleTimeString(lang, { hour: 'numeric', minute: '2-digit' }) : d.toLocaleString(lang, { weekday: 'long', hour: 'numeric', minute: '2-digit' });
  }
  function setHeld(active) {
    held = active;
    var team = (session && session.team) || { available: true };
    var lines = [];
    if (active) {
      if (team.available) {
        lines.push(t('held'));
        if (team.reply_time_minutes) lines.push(t('wait', { n: team.reply_time_minutes }));
      } else {
        lines.push(team.away_message || t('away'));
        var when = team.next_available_at && whenBack(team.next_available_at);
        if (when) lines.push(t('back', { when: when }));
        if (!emailForm.done) lines.push(t('leave'));
      }
    }
    $('.hsl').textContent = lines.join(' ');
    emailForm.hidden = !active || team.available || Boolean(emailForm.done);
    hs.hidden = !active;
    if (active) {
      // No agent answer is coming for what is waiting: no dots.
      Array.prototype.forEach.call(msgs.querySelectorAll('.live.typing'), (b) => { dropLive(b.getAttribute('data-id')); });
    }
  }
  emailForm.addEventListener('submit', (ev) => {
    ev.preventDefault();
    var field = $('#cw-email');
    var email = field.value.trim();
    if (!/^[^\s@]+@[^\s@]+\.[^\s@]+$/.test(email)) {
      field.setAttribute('aria-invalid', 'true');
      showError(t('badEmail'));
      field.focus();
      return;
    }
    field.removeAttribute('aria-invalid');
    showError('');
    api('POST', 'contact', { conversation_id: session.conversation_id, customer_id: session.customer_id, email: email, user_context: userContext() })
      .then((res) => {
        emailForm.done = res.email;
        setHeld(held);
        $('.hsl').textContent = t('saved', { email: res.email });
        emit('contact', { email: res.email });
      })
      .catch((e) => {
        if (e.code === 'invalid_request') field.setAttribute('aria-invalid', 'true');
        showError(e.code === 'invalid_request' ? t('badEmail') : friendly(e));
      });
  });

  // ---- The end-of-chat rating: five stars once the agent has answered; one per conversation, changeable.
  function showRating() {
    if (!rateEl.hidden || rateEl.done || !session) return;
    rateEl.textContent = '';
    rateEl.append(h('span', { class: 'rq' }, [t('rate')]));
    for (var n = 1; n <= 5; n++) {
      ((score) => {
        rateEl.append(h('button', {
          type: 'button',
          'aria-pressed': 'false',
          'aria-label': t('stars', { n: score }),
          onclick: () => {
            api('POST', 'rating', { conversation_id: session.conversation_id, score: score, user_context: userContext() })
              .then(() => {
                rateEl.done = score;
                rateEl.querySelectorAll('button').forEach((b, i) => { b.setAttribute('aria-pressed', String(i < score)); });
                rateEl.querySelector('.rq').textContent = t('thanks');
                emit('rating', { score: score });
              })
              .catch((e) => { showError(friendly(e)); });
          },
        }, ['\u2605']));
      })(n);
    }
    rateEl.hidden = false;
  }

  // ---- Conversation
  function addHistory(page, older) {
    var first = older ? msgs.firstChild : null;
    var fromBottom = log.scrollHeight - log.scrollTop;
    page.messages.forEach((m) => {
      if (byId(m.id)) return;
      var row = addRow(m.role, m.id, m, first);
      if (m.role === 'assistant') thumbs(row);
    });
    if (older) log.scrollTop = log.scrollHeight - fromBottom;
    nextBefore = page.has_more ? page.next_before : null;
    more.hidden = !nextBefore;
    if (page.messages.some((m) => m.role === 'assistant' && m.author !== 'human')) showRating();
  }
  function loadHistory(before) {
    var q = 'history?conversation_id=' + encodeURIComponent(session.conversation_id) + '&limit=50' + identityQuery();
    if (before) q += '&before=' + encodeURIComponent(before);
    return api('GET', q).then((page) => { addHistory(page, Boolean(before)); });
  }
  more.addEventListener('click', () => {
    if (nextBefore) loadHistory(nextBefore).catch((e) => { showError(friendly(e)); });
  });

  function postWithRetry(body, attempt) {
    // Network failures, 429 and 5xx are retried with the same client_message_id: one message, however many tries.
    return api('POST', 'send', body).catch((e) => {
      var transient = (!e.status && navigator.onLine !== false) || e.status === 429 || e.status >= 500;
      if (!transient || attempt >= 2) throw e;
      return new Promise((r) => { setTimeout(r, 1000 * Math.pow(2, attempt)); }).then(() => postWithRetry(body, attempt + 1));
    });
  }

  /** Sends a visitor message (with the files ready to go); `row` is a failed message being retried (its client_message_id and files kept). */
  function send(text, row) {
    text = String(text || '').trim();
    var files = row ? row.files || [] : ready();
    if ((!text && !files.length) || busyUploading()) return Promise.resolve(null);
    showError('');
    setChips(null);
    if (!row) {
      row = addRow('user', null, { text: text, attachments: files });
      row.cid = uuid();
      row.files = files;
      clearFiles();
    }
    row.classList.remove('failed');
    note(row, t('sending'));
    toBottom();
    var gen = generation;
    return ensureSession()
      .then(() => {
        var body = { conversation_id: session.conversation_id, customer_id: session.customer_id, text: text, client_message_id: row.cid, delivery: 'async' };
        if (files.length) body.file_refs = files.map((f) => f.upload_id);
        if (identity) body.user_context = userContext();
        // The reply is pushed on the socket, which must be open before the send.
        if (!sock) connect();
        var opened = Promise.race([sockOpen, new Promise((r) => { setTimeout(r, 5000); })]);
        return opened.then(() => postWithRetry(body, 0));
      })
      .then((res) => {
        if (gen !== generation) return null;
        note(row, null);
        row.b.setAttribute('data-id', res.message_id);
        pending[res.reply_id] = row;
        if (failed[res.reply_id]) turnFailed(row, failed[res.reply_id]);
        // A person holds the conversation: their answer comes unsolicited, no dots for the agent.
        if (held) unanswered[res.reply_id] = true;
        // The reply may have started streaming before the 202 came back.
        var live = liveRow(res.reply_id);
        if (live && live.b.classList.contains('live')) msgs.appendChild(live);
        toBottom();
        emit('message:sent', { message_id: res.message_id, reply_id: res.reply_id, text: text });
        return res;
      })
      .catch((e) => {
        if (gen !== generation) return null;
        row.classList.add('failed');
        note(row, friendly(e), true, () => { void send(text, row); input.focus(); });
        if (e.code === 'conversation_closed') offerNew(row);
        emit('error', { error: e.code || 'offline', message: e.message });
        return null;
      });
  }
  function offerNew(row) {
    var n = row.querySelector('.note');
    if (n) n.append(h('button', { type: 'button', onclick: () => { void newConversation(); } }, [t('newConv')]));
  }

  function syncInput() {
    sendBtn.disabled = !(input.value.trim() || ready().length) || busyUploading();
    // Grows with its text up to the CSS max-height, then scrolls.
    input.style.height = '';
    if (input.scrollHeight > input.clientHeight) input.style.height = input.scrollHeight + 2 + 'px';
  }
  input.addEventListener('input', syncInput);
  form.addEventListener('submit', (ev) => {
    ev.preventDefault();
    var text = input.value;
    if ((!text.trim() && !ready().length) || busyUploading()) return;
    input.value = '';
    void send(text);
    syncInput();
  });
  input.addEventListener('keydown', (ev) => {
    if (ev.key === 'Enter' && !ev.shiftKey && !ev.isComposing) {
      ev.preventDefault();
      form.requestSubmit();
    }
  });

  // ---- Files (when the site allows uploads): the paperclip, drag and drop onto the panel, or paste. Each file is
  // uploaded at once with its progress shown, then goes with the next message (file_refs).
  var MAX_BYTES = 25 * 1024 * 1024;
  var uploads = []; // {id, file, li, bar, upload_id, file_name, file_url, state: 'up' | 'ready' | 'bad'}
  var ready = () => uploads.filter((u) => u.state === 'ready');
  var busyUploading = () => uploads.some((u) => u.state === 'up');
  var canUpload = () => Boolean(session ? session.capabilities && session.capabilities.file_upload : config && config.capabilities && config.capabilities.file_upload);
  function clearFiles() {
    uploads = uploads.filter((u) => u.state === 'up');
    Array.prototype.forEach.call(filesEl.querySelectorAll('li:not(.up)'), (li) => { li.remove(); });
    filesEl.hidden = !filesEl.firstChild;
  }
  function dropUpload(u) {
    if (u.xhr && u.state === 'up') u.xhr.abort();
    uploads = uploads.filter((x) => x !== u);
    u.li.remove();
    filesEl.hidden = !filesEl.firstChild;
    syncInput();
    input.focus();
  }
  var UPLOAD_ERRORS = { unsupported_type: 'unsupported_type', too_many_files: 'too_many_files', file_upload_not_enabled: 'no_upload', payload_too_large: 'too_large', file_too_large: 'too_large' };
  function addFiles(list) {
    if (!canUpload()) return;
    Array.prototype.forEach.call(list || [], (file) => {
      if (uploads.filter((x) => x.state !== 'bad').length >= 5) { showError(t('maxFiles')); return; }
      var u = { file: file, file_name: file.name || 'file', state: 'up' };
      var x = h('button', { type: 'button', 'aria-label': t('remove', { name: u.file_name }), onclick: () => { dropUpload(u); } });
      x.innerHTML = ICON.x;
      u.bar = h('progress', { max: '100', value: '0', 'aria-label': t('uploading', { name: u.file_name }) });
      u.li = h('li', { class: 'up' }, [h('span', {}, [u.file_name]), u.bar, x]);
      filesEl.append(u.li);
      filesEl.hidden = false;
      uploads.push(u);
      syncInput();
      if (file.size > MAX_BYTES) return failUpload(u, 'too_large');
      ensureSession().then(() => { if (uploads.indexOf(u) >= 0) upload(u); }).catch((e) => { if (uploads.indexOf(u) >= 0) failUpload(u, null, e); });
    });
  }
  function failUpload(u, key, e) {
    u.state = 'bad';
    u.li.className = 'bad';
    if (u.bar) u.bar.remove();
    var message = key ? t(key, { name: u.file_name }) : e && !e.status ? t('offline') : t('uploadFailed', { name: u.file_name });
    u.li.insertBefore(h('span', { role: 'alert' }, [message]), u.li.lastChild);
    syncInput();
  }
  function upload(u) {
    var xhr = (u.xhr = new XMLHttpRequest());
    var data = new FormData();
    data.append('conversation_id', session.conversation_id);
    data.append('customer_id', session.customer_id);
    // A verified visitor's conversation needs the proof (multipart fields, as the upload route takes it).
    if (identity) {
      data.append('external_id', identity.external_id);
      if (identity.user_hash) data.append('user_hash', identity.user_hash);
    }
    data.append('file', u.file, u.file_name);
    xhr.open('POST', apiBase + '/api/public/widget/upload');
    xhr.setRequestHeader('X-Concierge-Site', siteId);
    xhr.upload.onprogress = (ev) => { if (ev.lengthComputable) u.bar.value = String(Math.round((ev.loaded / ev.total) * 100)); };
    xhr.onerror = () => { failUpload(u, null, {}); };
    xhr.onload = () => {
      var res = null;
      try { res = JSON.parse(xhr.responseText); } catch (e) { /* not JSON */ }
      if (xhr.status === 200 || xhr.status === 201) {
        Object.assign(u, { state: 'ready', upload_id: res.upload_id, file_name: res.file_name || u.file_name, file_url: res.file_url });
        u.li.className = '';
        u.bar.remove();
        say.textContent = t('uploaded', { name: u.file_name });
        syncInput();
        emit('file:uploaded', { upload_id: res.upload_id, file_name: u.file_name });
        return;
      }
      var code = (res && res.error) || (xhr.status === 413 ? 'payload_too_large' : '');
      failUpload(u, UPLOAD_ERRORS[code] || (xhr.status === 429 ? null : null), { status: xhr.status });
      if (code === 'too_many_files' || code === 'unsupported_type' || code === 'file_upload_not_enabled') emit('error', { error: code, message: res && res.message });
    };
    xhr.send(data);
  }
  clip.addEventListener('click', () => { fileIn.click(); });
  fileIn.addEventListener('change', () => { addFiles(fileIn.files); fileIn.value = ''; });
  input.addEventListener('paste', (ev) => {
    var files = ev.clipboardData && ev.clipboardData.files;
    if (files && files.length && canUpload()) {
      ev.preventDefault();
      addFiles(files);
    }
  });
  var dragDepth = 0;
  var hasFiles = (ev) => ev.dataTransfer && Array.prototype.indexOf.call(ev.dataTransfer.types || [], 'Files') >= 0;
  panel.addEventListener('dragenter', (ev) => {
    if (!hasFiles(ev) || !canUpload()) return;
    ev.preventDefault();
    dragDepth++;
    dropz.hidden = false;
  });
  panel.addEventListener('dragover', (ev) => { if (hasFiles(ev) && canUpload()) ev.preventDefault(); });
  panel.addEventListener('dragleave', () => { if (--dragDepth <= 0) { dragDepth = 0; dropz.hidden = true; } });
  panel.addEventListener('drop', (ev) => {
    dragDepth = 0;
    dropz.hidden = true;
    if (!hasFiles(ev) || !canUpload()) return;
    ev.preventDefault();
    addFiles(ev.dataTransfer.files);
  });

  // ---- A signed-in (verified) visitor's conversations: the list, one to go back to, or a new one.
  function showConversations(show) {
    var was = !convs.hidden;
    convs.hidden = !show;
    log.hidden = show;
    histBtn.setAttribute('aria-expanded', String(show));
    if (!show) {
      if (was && isOpen) log.focus();
      return;
    }
    var list = convs.querySelector('ul');
    list.textContent = '';
    $('.none').hidden = true;
    $('.ch').focus();
    api('GET', 'conversations?limit=30' + identityQuery())
      .then((res) => {
        (res.conversations || []).forEach((c) => {
          var current = c.conversation_id === session.conversation_id;
          list.append(h('li', {}, [h('button', { type: 'button', 'aria-current': current ? 'true' : null, onclick: () => { void switchTo(c.conversation_id); } }, [
            h('b', { dir: 'auto' }, [c.title || t('chat')]),
            h('span', { dir: 'auto' }, [plain(c.preview)]),
            h('span', {}, [stamp(new Date(c.updated_at))]),
          ])]));
        });
        $('.none').hidden = Boolean(list.firstChild);
      })
      .catch((e) => { showError(friendly(e)); });
  }
  histBtn.addEventListener('click', () => { showConversations(convs.hidden); });
  $('.bk').addEventListener('click', () => { showConversations(false); });
  $('.nc').addEventListener('click', () => { void newConversation(); });
  /** Shows another conversation of the visitor (its history and its socket). */
  function switchTo(id) {
    if (!session) return Promise.resolve();
    session.conversation_id = id;
    store.set(convKey, id);
    generation++;
    resetView();
    // Files uploaded to the conversation left behind belong to it (the server refuses them elsewhere).
    uploads.forEach((u) => { if (u.xhr && u.state === 'up') u.xhr.abort(); });
    uploads = [];
    filesEl.textContent = '';
    filesEl.hidden = true;
    showConversations(false);
    // The old conversation's socket goes now: none of its frames may land in this one.
    reconnect();
    return loadHistory(null).then(() => {
      greet();
      toBottom();
      emit('conversation', { conversation_id: id });
    }).catch((e) => { showError(friendly(e)); });
  }
  function newConversation() {
    return ensureSession()
      .then(() => api('POST', 'conversations/new', { user_context: userContext(), conversation_id: session.conversation_id }))
      .then((res) => {
        session.customer_id = res.customer_id;
        session.handoff = { active: false };
        return switchTo(res.conversation_id);
      })
      .catch((e) => { showError(friendly(e)); });
  }
  function reconnect() {
    var old = sock;
    sock = null;
    if (old) old.close();
    connect();
  }
  /** Empties the log (a conversation switch, a sign-out): its rows, live bubbles, chips, notes, the rating. */
  function resetView() {
    msgs.textContent = '';
    var g = log.querySelector('.greeting');
    if (g) g.remove();
    failed = {};
    pending = {};
    unanswered = {};
    following = null;
    nextBefore = null;
    more.hidden = true;
    setChips(null);
    typing.textContent = '';
    rateEl.hidden = true;
    rateEl.done = 0;
    emailForm.done = null;
    setHeld(false);
    showError('');
  }
  // ---- Voice call, when the agent offers it. The browser's own WebRTC peer talks to the
  // agent directly (transport 'direct': our signalling socket) or through a LiveKit room;
  // transcript frames arrive on the data channel / topic 'transcript'.
  var micBtn = $('.mic');
  var vc = $('.vc');
  var vLog = $('.vt');
  var vEnd = $('.vend');
  var audioEl = h('audio', { autoplay: '' });
  root.append(audioEl);
  var voice = null; // the call in progress: { id, info, stream, ws, pc, room, turns, over }

  function voiceUi(state) {
    micBtn.setAttribute('aria-pressed', String(state !== 'ended'));
    vc.setAttribute('data-state', state);
    $('.vs').textContent = state === 'live' ? t('onCall', { name: agentName }) : state === 'ended' ? t('callEnded') : t('connecting');
    vEnd.textContent = state === 'ended' ? t('closeTranscript') : t('endCall');
    // Nothing said: nothing to keep on screen once the call is over.
    vc.hidden = state === 'ended' && !vLog.firstChild;
  }

  /** One line per turn and speaker: partial frames rewrite it in place, the final one fixes it. */
  function onTranscript(v, data) {
    var f;
    try { f = JSON.parse(data); } catch (e) { return; }
    if (!f || f.type !== 'transcript' || v !== voice) return;
    var who = f.speaker === 'user' ? 'user' : 'assistant';
    var stick = vLog.scrollHeight - vLog.scrollTop - vLog.clientHeight < 30;
    var line = v.turns[who];
    if (!line) vLog.append((line = v.turns[who] = h('p', { class: who }, [h('b', {}, [(who === 'user' ? t('you') : agentName) + ':']), h('span')])));
    line.lastChild.textContent = String(f.text || '');
    line.classList.toggle('partial', Boolean(f.partial));
    if (!f.partial) v.turns[who] = null;
    if (stick) vLog.scrollTop = vLog.scrollHeight;
    emit('voice:transcript', f);
  }

  function callError(code, message) {
    var e = new Error(message || t('cant'));
    e.code = code;
    e.call = true;
    return e;
  }

  /** Non-trickle: the offer goes once ICE gathering is complete (or after 3 s, with what there is). */
  var gathered = (pc) => new Promise((done) => {
    if (pc.iceGatheringState === 'complete') done();
    pc.addEventListener('icegatheringstatechange', () => { if (pc.iceGatheringState === 'complete') done(); });
    setTimeout(done, 3000);
  });

  /** transport 'direct': join → joined (ICE servers) → offer → answer on our signalling socket; resolves when connected. */
  function viaDirect(v, res) {
    return new Promise((resolve, reject) => {
      var ws = (v.ws = new WebSocket(res.rtc_url));
      ws.onopen = () => { ws.send(JSON.stringify({ type: 'join', token: res.rtc_token })); };
      ws.onclose = () => { reject(callError('signalling_closed')); };
      ws.onmessage = (ev) => {
        var m;
        try { m = JSON.parse(ev.data); } catch (e) { return; }
        if (m.type === 'joined') {
          var pc = (v.pc = new RTCPeerConnection({ iceServers: m.ice_servers || [] }));
          pc.ontrack = (e) => { audioEl.srcObject = e.streams[0] || new MediaStream([e.track]); };
          pc.onconnectionstatechange = () => {
            if (pc.connectionState === 'connected') resolve();
            else if (/failed|closed/.test(pc.connectionState)) {
              reject(callError('connection_failed'));
              voiceEnd(v, 'connection_failed', t('cut'));
            }
          };
          pc.createDataChannel('transcript').onmessage = (e) => { onTranscript(v, typeof e.data === 'string' ? e.data : new TextDecoder().decode(e.data)); };
          v.stream.getAudioTracks().forEach((t) => { pc.addTrack(t, v.stream); });
          pc.createOffer()
            .then((o) => pc.setLocalDescription(o))
            .then(() => gathered(pc))
            .then(() => { ws.send(JSON.stringify({ type: 'offer', sdp: pc.localDescription.sdp })); })
            .catch(reject);
        } else if (m.type === 'answer' && v.pc) {
          v.pc.setRemoteDescription({ type: 'answer', sdp: m.sdp }).catch(reject);
        } else if (m.type === 'error') {
          reject(callError(m.error, m.message));
        } else if (m.type === 'ended') {
          voiceEnd(v, m.reason || 'ended');
        }
      };
    });
  }

  /** transport 'livekit': the LiveKit browser SDK, fetched from this host only when a call needs it. */
  function viaLivekit(v, res) {
    return new Promise((ok, no) => {
      if (window.LivekitClient) return ok();
      document.head.append(h('script', { src: apiBase + '/widget/livekit-client.js', onload: ok, onerror: () => { no(callError('livekit_unavailable')); } }));
    }).then(() => {
      var L = window.LivekitClient;
      var room = (v.room = new L.Room());
      room.on(L.RoomEvent.TrackSubscribed, (track) => { if (track.kind === 'audio') track.attach(audioEl); });
      room.on(L.RoomEvent.DataReceived, (payload, p, kind, topic) => { if (topic === 'transcript') onTranscript(v, new TextDecoder().decode(payload)); });
      return room.connect(res.rtc_url, res.rtc_token).then(() => {
        // Only once joined: a failed join rejects connect() (and says why) after its own Disconnected.
        room.on(L.RoomEvent.Disconnected, () => { voiceEnd(v, 'disconnected', t('cut')); });
        return room.localParticipant.publishTrack(v.stream.getAudioTracks()[0], { source: L.Track.Source.Microphone });
      });
    });
  }

  /** Starts a call: the microphone first (a refusal costs no voice session), then /voice/start, then the transport. */
  function voiceStart() {
    if (voice) return Promise.resolve(null);
    var v = (voice = { turns: {} });
    showError('');
    vLog.textContent = '';
    voiceUi('connecting');
    var check = () => { if (v.over) throw null; };
    return navigator.mediaDevices.getUserMedia({ audio: true })
      .then((stream) => {
        v.stream = stream;
        check();
        return ensureSession().then(() => api('POST', 'voice/start', { conversation_id: session.conversation_id, user_context: userContext() }));
      })
      .then((res) => {
        v.id = res.voice_session_id;
        v.info = { voice_session_id: v.id, room_name: res.room_name, transport: res.transport, voice_mode: res.voice_mode, voice_animation_style: res.voice_animation_style };
        check();
        return res.transport === 'livekit' ? viaLivekit(v, res) : viaDirect(v, res);
      })
      .then(() => {
        check();
        voiceUi('live');
        emit('voice:state', Object.assign({ state: 'live' }, v.info));
        return v.info;
      })
      .catch((e) => {
        var msg = e && (/NotAllowed|NotFound/.test(e.name) ? t('mic') : e.code === 'out_of_credits' ? t('noCalls') : e.status || e.call ? e.message : navigator.onLine === false ? t('offline') : t('cant'));
        if (e && !v.over) emit('error', { error: e.code || e.name, message: msg });
        voiceEnd(v, e ? e.code || e.name : v.over, msg);
        return null;
      });
  }

  /** Ends a call (idempotent): tears the media down at once, then tells the server (/voice/stop). */
  function voiceEnd(v, reason, message) {
    var first = !v.over;
    v.over = v.over || reason || 'ended';
    // Run again for what a late step of the start may have created after the end.
    if (v.ws && v.ws.readyState === 1) v.ws.send('{"type":"bye"}');
    if (v.ws) v.ws.close();
    if (v.pc) v.pc.close();
    if (v.room) v.room.disconnect();
    if (v.stream) v.stream.getTracks().forEach((t) => { t.stop(); });
    if (v.id && !v.stopped) v.stopped = api('POST', 'voice/stop', { voice_session_id: v.id }).catch(() => null);
    if (first) {
      if (voice === v) {
        voice = null;
        audioEl.srcObject = null;
        voiceUi('ended');
        if (message) showError(message);
      }
      emit('voice:state', Object.assign({ state: 'ended', reason: v.over }, v.info));
    }
    return v.stopped || Promise.resolve(null);
  }

  micBtn.addEventListener('click', () => { void (voice ? voiceEnd(voice, 'visitor') : voiceStart()); });
  vEnd.addEventListener('click', () => {
    if (voice) void voiceEnd(voice, 'visitor');
    else vc.hidden = true;
    if (vc.hidden) micBtn.focus();
  });

  function greet() {
    var a = (session && session.agent) || (config && config.agent) || {};
    var text = attr('greeting') || a.greeting || t('hello');
    var row = addRow('assistant', null, { text: text, greeting: true });
    row.classList.add('greeting');
    // Above the "Earlier messages" button: it opens the conversation, however far back it goes.
    log.insertBefore(row, more);
    var starters = attr('starters') ? attr('starters').split('|') : a.starters || [];
    starters = starters.map((q) => q.trim()).filter(Boolean).slice(0, 5);
    if (!msgs.querySelector('.msg') && starters.length) setChips(starters);
  }

  /** The site's look and agent are known: the launcher can show. */
  function showLauncher(c) {
    config = c;
    agentName = (c.agent && c.agent.name) || agentName;
    $('.av').textContent = agentName.charAt(0).toUpperCase();
    applyLook(c.appearance);
    relabel();
    clip.hidden = !canUpload();
    host.hidden = false;
  }

  /** An unknown, suspended or misconfigured site: nothing to show the visitor; the site owner reads why in the console. */
  function refused(e) {
    emit('error', { error: e.code || 'offline', message: e.message });
    if (e.code === 'unknown_site' || e.code === 'site_suspended' || e.code === 'origin_not_allowed' || e.code === 'no_workflow_configured') {
      host.remove();
      console.error('Concierge widget hidden: ' + e.message + ' (' + e.code + ')');
      return true;
    }
    return false;
  }

  /**
   * The visitor's session (/init: it opens or resumes the conversation), made once, on first need: the panel opened,
   * a message or file sent, a call started. Then the history, the greeting and the reply socket.
   */
  function ensureSession() {
    if (session) return Promise.resolve(session);
    if (starting) return starting;
    var saved = store.get(convKey);
    var body = {};
    if (saved) body.conversation_id = saved;
    if (identity) body.user_context = userContext();
    var gen = generation;
    var check = () => { var e = stale(gen); if (e) throw e; };
    starting = api('POST', 'init', body)
      .then((res) => {
        check();
        session = res;
        store.set(convKey, res.conversation_id);
        showLauncher({ agent: res.agent, appearance: res.appearance || (config && config.appearance), capabilities: res.capabilities });
        micBtn.hidden = !(res.capabilities && res.capabilities.voice_chat);
        histBtn.hidden = res.auth_level !== 'verified';
        return loadHistory(null);
      })
      .then(() => {
        check();
        greet();
        setHeld(Boolean(session.handoff && session.handoff.active));
        connect();
        syncInput();
        toBottom();
        host.setAttribute('data-state', 'ready');
        emit('ready', { conversation_id: session.conversation_id, customer_id: session.customer_id, agent: session.agent });
        return session;
      })
      .catch((e) => {
        // A superseded start (a shutdown or boot came between) leaves the current state alone.
        if (e && e.stale) throw e;
        starting = null;
        if (session) session = null;
        if (!refused(e)) showError(friendly(e));
        throw e;
      });
    starting.catch(() => undefined);
    return starting;
  }

  function start() {
    var open = store.get(openKey);
    var wantOpen = open ? open === '1' : script.hasAttribute('data-open') && attr('open') !== 'false';
    // A page view alone opens no conversation: with none stored and the panel closed, only the site's public look is read.
    var first = store.get(convKey) || wantOpen
      ? ensureSession()
      : api('GET', 'config').then((c) => {
        // A session started meanwhile (the page called open() or send()): it has said all of this already.
        if (session || starting) return;
        showLauncher(c);
        host.setAttribute('data-state', 'idle');
        emit('idle', { agent: c.agent });
      }).catch((e) => { if (!refused(e)) { host.hidden = false; showError(friendly(e)); } });
    return first.then(() => { if (wantOpen && host.isConnected) setOpen(true, false); }, () => undefined);
  }

  /** Forgets the visitor: the call, the socket, the stored conversation and the screen. The next person starts fresh. */
  function shutdown() {
    generation++;
    if (voice) void voiceEnd(voice, 'visitor');
    var old = sock;
    sock = null;
    if (old) old.close();
    clearTimeout(silenceTimer);
    clearTimeout(retryTimer);
    if (isOpen) setOpen(false, false);
    session = null;
    starting = null;
    identity = null;
    uploads.forEach((u) => { if (u.xhr && u.state === 'up') u.xhr.abort(); });
    uploads = [];
    filesEl.textContent = '';
    filesEl.hidden = true;
    resetView();
    histBtn.hidden = true;
    showConversations(false);
    // Nothing of theirs for the next person: the call transcript, the email, a draft, the list of their conversations.
    vLog.textContent = '';
    vc.hidden = true;
    $('#cw-email').value = '';
    input.value = '';
    syncInput();
    convs.querySelector('ul').textContent = '';
    launcher.classList.remove('unread');
    relabel();
    store.del(convKey);
    store.del(openKey);
    host.setAttribute('data-state', 'idle');
    emit('shutdown', {});
  }

  window.ConciergeWidget = {
    /**
     * Subscribes to 'ready' (the session started), 'idle' (the launcher shows, no session yet), 'open', 'close',
     * 'message:received' (every pushed frame but pings), 'message:sent', 'ui:command', 'error', 'contact', 'feedback',
     * 'rating', 'file:uploaded', 'conversation' (another conversation shown), 'shutdown',
     * 'voice:state' ({state: 'live' | 'ended', voice_session_id, room_name, transport, reason}) and 'voice:transcript' (each transcript frame);
     * returns an unsubscribe function.
     */
    on: (event, fn) => {
      (handlers[event] = handlers[event] || []).push(fn);
      return () => { handlers[event] = (handlers[event] || []).filter((f) => f !== fn); };
    },
    send: send,
    open: () => { setOpen(true, true); },
    close: () => { setOpen(false, false); },
    /** A signed-in visitor (single-page apps): {user_id, user_hash}. Another visitor's stored conversation is forgotten first. */
    boot: (opts) => {
      opts = opts || {};
      var next = opts.user_id ? { external_id: String(opts.user_id), user_hash: opts.user_hash ? String(opts.user_hash) : undefined } : null;
      var same = next && identity && next.external_id === identity.external_id;
      if (!same) shutdown();
      identity = next;
      return ensureSession().catch(() => null);
    },
    shutdown: shutdown,
    get conversationId() { return session ? session.conversation_id : null; },
    /** The voice call: start() resolves with the session (or null on failure), stop() with /voice/stop's answer, injectText(text) says text into the live call. */
    voice: {
      start: voiceStart,
      stop: () => (voice ? voiceEnd(voice, 'visitor') : Promise.resolve(null)),
      injectText: (text) => (voice && voice.id ? api('POST', 'voice/inject_text', { voice_session_id: voice.id, text: String(text) }) : Promise.reject(new Error('No voice call in progress'))),
      get session() { return voice && voice.info ? Object.assign({ state: vc.getAttribute('data-state') }, voice.info) : null; },
    },
  };

  lang = pickLanguage(null);
  relabel();
  if (!siteId) {
    console.error('Concierge widget: the script tag needs data-site-id');
    return;
  }
  function mount() {
    document.body.appendChild(host);
    void start();
  }
  if (document.body) mount();
  else document.addEventListener('DOMContentLoaded', mount);
})();
