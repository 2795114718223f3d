import type { SecretBox } from '../../../lib/crypto/secret-box';
import { signLink } from '../../storage/signed-links';

/**
 * Signs download links to stored bytes: a visitor's upload or a knowledge-base file the
 * agent hands out. Links are absolute (PUBLIC_BASE_URL): the widget runs on another site's page.
 */
export class UploadLinks {
  constructor(
    private readonly box: SecretBox,
    private readonly publicBaseUrl: string,
  ) {}

  /** A signed link to an upload's bytes. */
  upload(row: { blob_key: string; mime_type: string; file_name: string }): string {
    return signLink(this.box, this.publicBaseUrl, { sha256: row.blob_key, mime: row.mime_type, name: row.file_name });
  }

  /** A signed link to a knowledge-base file's bytes (an agent's attachment). */
  kbFile(file: { sha256: string; mime_type: string; name: string }): string {
    return signLink(this.box, this.publicBaseUrl, { sha256: file.sha256, mime: file.mime_type, name: file.name });
  }
}
