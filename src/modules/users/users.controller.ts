import { Body, Controller, Delete, Get, HttpCode, Param, Post, Query, UseInterceptors } from '@nestjs/common';
import { ApiCreatedResponse, ApiNoContentResponse, ApiOkResponse, ApiTags } from '@nestjs/swagger';
import { Access, CurrentPrincipal, Principal } from '../../common/auth/principal';
import { ApiAuthenticated, ApiErrors, ApiPageResponse, ApiUuidParam } from '../../common/openapi/api-docs';
import { Page, PageQueryDto } from '../../common/pagination/cursor';
import { CreateUserDto, IssuedToken, TokenView, UserView, UserWithToken } from './dto/user.dto';
import { UsersService } from './users.service';
import { ReadRetryInterceptor } from '../../infra/database/read-retry';

@ApiTags('users')
@ApiAuthenticated()
@UseInterceptors(ReadRetryInterceptor)
@Controller('api/v1/users')
export class UsersController {
  constructor(private readonly users: UsersService) {}

  /** Global admins create users and service accounts; the token is shown only in this response. */
  @Post()
  @Access('admin')
  @ApiCreatedResponse({ type: UserWithToken })
  @ApiErrors(400, 409, 413)
  create(@Body() body: CreateUserDto): Promise<UserWithToken> {
    return this.users.createUser(body.name, body.global_role);
  }

  @Get('me')
  @Access('user')
  @ApiOkResponse({ type: UserView })
  me(@CurrentPrincipal() principal: Principal): Promise<UserView> {
    return this.users.me(principal);
  }

  /**
   * The secret is shown only in this response; at most RUNPLANE_MAX_TOKENS_PER_USER live tokens (409
   * TOKEN_LIMIT_REACHED).
   */
  @Post('me/tokens')
  @HttpCode(201)
  @Access('user')
  @ApiCreatedResponse({ type: IssuedToken })
  @ApiErrors(400, 409, 413)
  issueToken(@CurrentPrincipal() principal: Principal): Promise<IssuedToken> {
    return this.users.issueToken(principal);
  }

  /** The caller's live tokens (ids and creation times, never secrets). */
  @Get('me/tokens')
  @Access('user')
  @ApiPageResponse(TokenView)
  @ApiErrors(400)
  listTokens(@CurrentPrincipal() principal: Principal, @Query() q: PageQueryDto): Promise<Page<TokenView>> {
    return this.users.listTokens(principal, q.limit, q.cursor);
  }

  /** Revokes one of the caller's tokens at once (other instances may accept it for up to 10 s more). */
  @Delete('me/tokens/:tokenId')
  @HttpCode(204)
  @Access('user')
  @ApiUuidParam('tokenId', 'Token')
  @ApiNoContentResponse({ description: 'Revoked.' })
  @ApiErrors(400, 404)
  revokeToken(@CurrentPrincipal() principal: Principal, @Param('tokenId') tokenId: string): Promise<void> {
    return this.users.revokeToken(principal, tokenId);
  }
}
